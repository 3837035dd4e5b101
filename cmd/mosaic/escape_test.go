package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// escapeScript runs inside a session and answers each check "allowed" or
// "denied". Its arguments are the stand-ins' paths; the host process's marker
// comes in two halves and is joined in a file, so that no command line inside
// (the script's own included) contains it.
const escapeScript = `
ssh=$1 aws=$2 other_ws=$3 other_state=$4 rt=$5 shm=$6 sysv=$7 outside=$8 ws=$9; shift 9
host_tmp=$1 mark1=$2 mark2=$3 claude=$4
c() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n allowed"; else echo "$n denied"; fi; }
c ssh-key cat "$ssh"
c aws-credentials cat "$aws"
c claude-state cat "$claude"
c other-workspace cat "$other_ws/b-secret"
c other-state cat "$other_state/home/b-home-secret"
c user-bus test -e "$rt/bus"
c systemd-private test -e "$rt/systemd/private"
c systemd-run timeout 5 systemd-run --user --wait true
printf '%s%s' "$mark1" "$mark2" > /tmp/marker
c host-process grep -qsF -f /tmp/marker /proc/[0-9]*/cmdline
c host-shm test -e "/dev/shm/$shm"
c host-sysv awk -v k="$sysv" '$1 == k { f = 1 } END { exit !f }' /proc/sysvipc/shm
c write-outside touch "$outside/escaped"
c write-usr touch /usr/mosaic-escaped
c host-cgroup test -e /sys/fs/cgroup
c env-leak sh -c 'env | grep -q MOSAIC_TEST_LEAK'
c workspace-write touch "$ws/written"
c tmp-write touch /tmp/written
c host-tmp test -e "$host_tmp"
`

// wantEscape is what every check must answer in a sound sandbox.
var wantEscape = map[string]string{
	"ssh-key": "denied", "aws-credentials": "denied", "claude-state": "denied", "other-workspace": "denied", "other-state": "denied",
	"user-bus": "denied", "systemd-private": "denied", "systemd-run": "denied", "host-process": "denied",
	"host-shm": "denied", "host-sysv": "denied", "write-outside": "denied", "write-usr": "denied",
	"host-cgroup": "denied", "env-leak": "denied",
	"workspace-write": "allowed", "tmp-write": "allowed", "host-tmp": "denied",
}

// TestEscapeTable runs the checks from inside a real session against
// stand-ins that are first shown to exist on the host, then runs them again in
// a deliberately broken sandbox (an extra bind exposing the SSH stand-in),
// which must fail exactly the matching check.
func TestEscapeTable(t *testing.T) {
	needRig(t)
	f := newEscapeFixture(t)
	for _, kind := range [][]string{nil, {"--scope"}} {
		name := "service"
		if kind != nil {
			name = "scope"
		}
		t.Run("sound-"+name, func(t *testing.T) {
			f.expect(t, f.check(t, nil, kind...), wantEscape)
		})
		t.Run("broken-"+name, func(t *testing.T) {
			got := f.check(t, nil, append([]string{"--ro", f.sshDir}, kind...)...)
			f.expectOnly(t, got, wantEscape, "ssh-key")
		})
	}
}

// escapeFixture is the stand-ins of the escape table, each shown to exist
// on the host, and the arguments the script takes.
type escapeFixture struct {
	args                    []string
	sshDir, outside         string
	hostTmp, marker, claude string
}

func newEscapeFixture(t *testing.T) *escapeFixture {
	home, rt := homeDir(), os.Getenv("XDG_RUNTIME_DIR")
	id := randomHex()
	mustWrite := func(path, content string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(path) })
		return path
	}
	sshDir := filepath.Join(home, ".ssh")
	ssh := mustWrite(filepath.Join(sshDir, "id_mosaic_test_"+id), "PRIVATE KEY stand-in")
	aws := mustWrite(filepath.Join(home, ".aws", "credentials_mosaic_test_"+id), "aws stand-in")
	claude := mustWrite(filepath.Join(home, ".claude", "credentials_mosaic_test_"+id), "claude sign-in stand-in")

	// Another session, with its own workspace and a file in its own home.
	otherWS := workspace(t)
	mustWrite(filepath.Join(otherWS, "b-secret"), "b")
	other := sessionName(t)
	mustMosaic(t, "start", "--name", other, "--workspace", otherWS, "--", "sh", "-c", `echo b > "$HOME/b-home-secret"; sleep 300`)
	otherState := filepath.Join(stateRoot(), "sessions", other)

	// A host process whose command line carries a marker.
	marker := "mosaic-host-marker-" + id
	host := exec.Command("bash", "-c", "exec -a "+marker+" sleep 300")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Process.Kill(); host.Wait() })

	shm := "mosaic-test-" + id
	mustWrite(filepath.Join("/dev/shm", shm), "shm stand-in")
	key, _ := strconv.ParseUint(id[:6], 16, 32)
	shmid, err := unix.SysvShmGet(int(key), 4096, unix.IPC_CREAT|unix.IPC_EXCL|0o600)
	if err != nil {
		t.Fatalf("creating a SysV segment: %v", err)
	}
	t.Cleanup(func() { unix.SysvShmCtl(shmid, unix.IPC_RMID, nil) })

	outside, err := os.MkdirTemp(home, "mosaic-test-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	hostTmp := mustWrite(filepath.Join("/tmp", "mosaic-host-tmp-"+id), "host tmp stand-in")

	// What a desktop session imports into the user manager reaches every unit.
	systemctl(t, "set-environment", "MOSAIC_TEST_LEAK=token-"+id)
	t.Cleanup(func() { systemctl(t, "unset-environment", "MOSAIC_TEST_LEAK") })

	// Each stand-in exists on the host, so a denial means the sandbox hid it.
	eventually(t, 5*time.Second, "the other session to write in its home", func() bool {
		_, err := os.Stat(filepath.Join(otherState, "home", "b-home-secret"))
		return err == nil
	})
	for _, p := range []string{ssh, aws, claude, filepath.Join(otherWS, "b-secret"), filepath.Join(rt, "bus"),
		filepath.Join(rt, "systemd", "private"), filepath.Join("/dev/shm", shm), hostTmp, "/sys/fs/cgroup"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("stand-in %s missing on the host: %v", p, err)
		}
	}
	if _, err := exec.LookPath("systemd-run"); err != nil {
		t.Fatal("systemd-run missing on the host")
	}
	if b, _ := os.ReadFile("/proc/" + strconv.Itoa(host.Process.Pid) + "/cmdline"); !strings.Contains(string(b), marker) {
		t.Fatalf("host process cmdline %q lacks the marker", b)
	}
	if b, _ := os.ReadFile("/proc/sysvipc/shm"); !strings.Contains(string(b), " "+strconv.FormatUint(key, 10)+" ") {
		t.Fatal("host SysV segment not in /proc/sysvipc/shm")
	}
	if err := os.WriteFile(filepath.Join(outside, "probe"), nil, 0o600); err != nil {
		t.Fatalf("outside dir not writable on the host: %v", err)
	}
	os.Remove(filepath.Join(outside, "probe"))
	if !strings.Contains(systemctl(t, "show-environment"), "MOSAIC_TEST_LEAK=") {
		t.Fatal("the user manager does not hold the leak stand-in")
	}

	return &escapeFixture{args: []string{ssh, aws, otherWS, otherState, rt, shm, strconv.FormatUint(key, 10), outside},
		sshDir: sshDir, outside: outside, hostTmp: hostTmp, marker: marker, claude: claude}
}

// check runs the escape script in a session started with extra flags, in
// mosaic's environment plus env.
func (f *escapeFixture) check(t *testing.T, env []string, extra ...string) map[string]string {
	t.Helper()
	ws := workspace(t)
	argv := append([]string{"run", "--workspace", ws}, extra...)
	argv = append(argv, "--", "sh", "-c", escapeScript, "sh")
	argv = append(argv, f.args...)
	argv = append(argv, ws, f.hostTmp, f.marker[:10], f.marker[10:], f.claude)
	r := mosaicWith(t, env, "", argv...)
	if r.code != 0 {
		t.Fatalf("escape checks: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			got[k] = v
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "written")); err != nil {
		t.Error("the workspace write did not reach the host")
	}
	if _, err := os.Stat(filepath.Join(f.outside, "escaped")); err == nil {
		t.Error("a write outside the workspace reached the host")
	}
	return got
}

// expect checks every answer against want.
func (f *escapeFixture) expect(t *testing.T, got, want map[string]string) {
	t.Helper()
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %s, want %s", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("ran %d checks, want %d: %v", len(got), len(want), got)
	}
}

// expectOnly checks that exactly the check named differs from want (a
// sandbox broken on purpose).
func (f *escapeFixture) expectOnly(t *testing.T, got, want map[string]string, only string) {
	t.Helper()
	var differ []string
	for name, w := range want {
		if got[name] != w {
			differ = append(differ, name)
		}
	}
	if strings.Join(differ, ",") != only {
		t.Errorf("a sandbox broken on purpose failed checks %v, want exactly [%s]", differ, only)
	}
}
