package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"mosaic/sandbox/escapes"

	"golang.org/x/sys/unix"
)

// wantEscape is what every check of the table must answer in a sound
// sandbox.
var wantEscape = func() map[string]string {
	w := map[string]string{}
	for _, c := range escapes.Table {
		w[c.Name] = c.Want
	}
	return w
}()

// escapeFixture holds the stand-ins of the escape table, each made on the
// host and shown to exist (and, run unconfined, reachable) first, so that a
// denial in a session means the sandbox hid it.
type escapeFixture struct {
	stand   escapes.StandIns
	sshDir  string
	outside string
}

func newEscapeFixture(t *testing.T) *escapeFixture {
	t.Helper()
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
	homeFile := mustWrite(filepath.Join(home, ".mosaic-test-"+id), "a file in the real home")
	ssh := mustWrite(filepath.Join(sshDir, "id_mosaic_test_"+id), "PRIVATE KEY stand-in")
	aws := mustWrite(filepath.Join(home, ".aws", "credentials_mosaic_test_"+id), "aws stand-in")
	claude := mustWrite(filepath.Join(home, ".claude", "credentials_mosaic_test_"+id), "claude sign-in stand-in")

	// Another session, with its own workspace and a file in its own home:
	// its first run writes the file, which the init saves into the kept
	// home on disk when the run ends (a running session's home is a tmpfs,
	// issue 31.15); the second run keeps it running.
	otherWS := workspace(t)
	mustWrite(filepath.Join(otherWS, "secret"), "b")
	other := sessionName(t)
	mustMosaic(t, "run", "--name", other, "--workspace", otherWS, "--", "sh", "-c", `echo b > "$HOME/secret"`)
	mustMosaic(t, "start", "--name", other, "--workspace", otherWS, "--", "sleep", "300")
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
		_, err := os.Stat(filepath.Join(otherState, "home", "secret"))
		return err == nil
	})
	for _, p := range []string{homeFile, ssh, aws, claude, filepath.Join(otherWS, "secret"), filepath.Join(rt, "bus"),
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

	// A service on the host's loopback (and so its network namespace).
	port, lo, err := escapes.LoopbackStandIn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lo.Close() })

	stand := escapes.StandIns{HomeFile: homeFile, SSHKey: ssh, AWSCredentials: aws, ClaudeState: claude, OtherWorkspace: otherWS,
		OtherState: otherState, RuntimeDir: rt, SHM: shm, SysVKey: strconv.FormatUint(key, 10), HostTmp: hostTmp, Outside: outside,
		Marker: marker, LeakVar: "MOSAIC_TEST_LEAK", LoopbackPort: port}
	// Run on the host, the same script reaches every stand-in it should:
	// a denial inside means the sandbox hid it.
	{
		ws := workspace(t)
		s := stand
		s.Workspace = ws
		out, err := exec.Command("sh", append([]string{"-c", escapes.Script(escapes.Table), "sh"}, s.Args()...)...).Output()
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(outside, "escaped"))
		got := escapes.Parse(string(out))
		for _, c := range escapes.Table {
			if c.Name == "systemd-run" || c.Name == "env-leak" || c.Name == "write-usr" || c.Name == "tmp-write" {
				continue // reached only through the manager, by root, or in a /tmp of one's own
			}
			if got[c.Name] != escapes.Allowed {
				t.Errorf("on the host, %s: %s, want allowed (the stand-in is not reachable even unconfined)", c.Name, got[c.Name])
			}
		}
	}
	return &escapeFixture{stand: stand, sshDir: sshDir, outside: outside}
}

// check runs the whole table in a session started with extra flags (and
// env added to mosaic's environment).
func (f *escapeFixture) check(t *testing.T, env []string, extra ...string) map[string]string {
	t.Helper()
	ws := workspace(t)
	s := f.stand
	s.Workspace = ws
	// Direct: the table's workspace write is checked on the host (the same
	// sandbox holds a clone-mode session: TestDefaultIsClone).
	argv := append([]string{"run", "--direct", "--workspace", ws}, extra...)
	argv = append(argv, "--", "sh", "-c", escapes.Script(escapes.Table), "sh")
	argv = append(argv, s.Args()...)
	bin := mosaicBin
	if env != nil {
		bin = hookedMosaic(t) // the test hooks (MOSAIC_TEST_EXTRA_RO) are only in this build
	}
	cmd := exec.Command(bin, argv...)
	cmd.Env = append(os.Environ(), env...)
	r := runResult(t, cmd)
	if r.code != 0 {
		t.Fatalf("escape checks: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	got := escapes.Parse(r.stdout)
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
	for _, c := range escapes.Table {
		if got[c.Name] != want[c.Name] {
			t.Errorf("%s (%s): %s, want %s", c.Name, c.What, got[c.Name], want[c.Name])
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
	for _, c := range escapes.Table {
		if got[c.Name] != want[c.Name] {
			differ = append(differ, c.Name)
		}
	}
	if strings.Join(differ, ",") != only {
		t.Errorf("a sandbox broken on purpose failed checks %v, want exactly [%s]", differ, only)
	}
}

// TestEscapeTable runs the checks from inside a real session against
// stand-ins that are first shown to exist on the host, then runs them again in
// a deliberately broken sandbox (an extra bind exposing the SSH stand-in),
// which must fail exactly the matching check.
func TestEscapeTable(t *testing.T) {
	needRig(t)
	f := newEscapeFixture(t)
	for _, kind := range [][]string{nil, {"--scope", "--direct"}} {
		name := "service"
		if kind != nil {
			name = "scope"
		}
		t.Run("sound-"+name, func(t *testing.T) {
			f.expect(t, f.check(t, nil, kind...), wantEscape)
		})
		t.Run("broken-"+name, func(t *testing.T) {
			// --ro ~/.ssh is refused (the deny-list): the test hook binds
			// it past the check.
			got := f.check(t, []string{"MOSAIC_TEST_EXTRA_RO=" + f.sshDir}, kind...)
			f.expectOnly(t, got, wantEscape, "ssh-key")
		})
	}
}
