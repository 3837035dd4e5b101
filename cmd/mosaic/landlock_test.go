package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"mosaic/sandbox"
	"mosaic/sandbox/escapes"
)

// noBwrap is the environment of a host where bwrap cannot run, as in a
// container: mosaic's bwrap is one that does not exist.
var noBwrap = []string{sandbox.BwrapEnv + "=/nonexistent/bwrap"}

// withoutScoping makes the sessions' inits see a kernel with Landlock ABI 5
// (sandbox.LandlockFaultEnv) until the test ends: the deliberately weakened
// sandbox the scoping checks are first shown to fail against.
func withoutScoping(t *testing.T) {
	t.Helper()
	systemctl(t, "set-environment", sandbox.LandlockFaultEnv+"=old-kernel")
	t.Cleanup(func() { systemctl(t, "unset-environment", sandbox.LandlockFaultEnv) })
}

// wantLandlock is what the escape table answers in --sandbox landlock: what
// bwrap's layer denies, but for what only namespaces can hide (no IPC
// namespace of its own: SysV segments are visible; and no PID namespace
// where systemd lacks PrivatePIDs, before 257: host processes are visible;
// as `mosaic doctor` says).
func wantLandlock(t *testing.T) map[string]string {
	w := map[string]string{}
	for k, v := range wantEscape {
		w[k] = v
	}
	w["host-sysv"] = "allowed"
	if managerVersion(t) < 257 {
		w["host-process"] = "allowed"
	}
	return w
}

// TestLandlockEscapeTable runs the escape table in --sandbox landlock on a
// host where bwrap cannot run (where the default mode refuses), sound and
// with a bind exposing the SSH stand-in; then checks what systemd's layer
// leaves in view without bwrap (each first shown reachable on the host),
// that systemd hears only the init, and that a session refuses to start
// when the kernel lacks the Landlock the mode needs.
func TestLandlockEscapeTable(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	r := mosaicWith(t, noBwrap, "", "run", "--json", "--workspace", ws, "--", "true")
	if code, _ := jsonError(t, r); r.code != 3 || code != "sandbox-unavailable" {
		t.Fatalf("without bwrap the default mode: exit %d code %s, want 3 sandbox-unavailable", r.code, code)
	}
	f := newEscapeFixture(t)
	t.Run("sound", func(t *testing.T) {
		f.expect(t, f.check(t, noBwrap, "--sandbox", "landlock"), wantLandlock(t))
	})
	t.Run("broken", func(t *testing.T) {
		env := append([]string{"MOSAIC_TEST_EXTRA_RO=" + f.sshDir}, noBwrap...) // --ro ~/.ssh is refused: the hook binds it
		f.expectOnly(t, f.check(t, env, "--sandbox", "landlock"), wantLandlock(t), "ssh-key")
	})
	t.Run("beyond-systemd", func(t *testing.T) {
		// What systemd's layer leaves in view here: the session's state
		// directory (bound for its ExecStopPost; only Landlock keeps the
		// command to its home), the host's processes (signals are Landlock's
		// to scope).
		name := sessionName(t)
		record := filepath.Join(stateRoot(), "sessions", name, "session.json")
		// A host process's /proc entries beyond its command line are
		// Landlock's to guard too (ptrace's checks): its environment, its root.
		// And the host's /run, where the system bus and journald listen
		// on path sockets, which Landlock does not govern: systemd covers it.
		runSocket := "/run/systemd/journal/stdout"
		if _, err := os.Stat(runSocket); err != nil {
			t.Fatalf("stand-in %s missing on the host: %v", runSocket, err)
		}
		script := `echo '{}' > "$1" && echo written; kill -0 "$2" && echo signalled; test -e "$3" && echo run-visible;
			grep -q . /proc/"$2"/environ && echo environ-read; ls /proc/"$2"/root/ && echo root-listed; true`
		host := exec.Command("sleep", "300")
		if err := host.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { host.Process.Kill(); host.Wait() }()
		pid := strconv.Itoa(host.Process.Pid)
		if err := exec.Command("sh", "-c", "kill -0 "+pid+" && grep -q . /proc/"+pid+"/environ && ls /proc/"+pid+"/root/").Run(); err != nil {
			t.Fatalf("the host process cannot be signalled, or its environment and root read, from the host: %v", err)
		}
		r := mosaicWith(t, noBwrap, "", "run", "--sandbox", "landlock", "--direct", "--name", name, "--workspace", ws, "--", "sh", "-c", script, "sh", record, pid, runSocket)
		if r.code != 0 || strings.TrimSpace(r.stdout) != "" {
			t.Errorf("exit %d, want 0, the record, the host process and the host's /run out of reach: %q %s", r.code, r.stdout, r.stderr)
		}
		if b, err := os.ReadFile(record); err != nil || strings.TrimSpace(string(b)) == "{}" {
			t.Errorf("the record was not there or was overwritten (%v): %q", err, b)
		}
		if err := os.WriteFile(record, []byte("{}\n"), 0o600); err != nil {
			t.Errorf("the record is not writable on the host, so the check proves nothing: %v", err)
		}
	})
	t.Run("notify", func(t *testing.T) {
		// systemd's notification socket is bound into the unit (the init
		// reports READY=1 through it) and visible to the command here; only
		// the init, the unit's main process, is heard.
		name := sessionName(t)
		sock := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "systemd", "notify")
		mustMosaic(t, "start", "--sandbox", "landlock", "--direct", "--name", name, "--workspace", ws, "--", "sh", "-c",
			`NOTIFY_SOCKET="$1" systemd-notify --status=forged-by-the-command; echo sent; sleep 300`, "sh", sock)
		defer mosaic(t, "stop", name)
		eventually(t, 5*time.Second, "the command to send its notification", func() bool {
			out, _ := exec.Command("journalctl", "--user", "-t", "mosaic-"+name, "-o", "cat", "--no-pager").Output()
			return strings.Contains(string(out), "sent")
		})
		if s := unitProperty(t, "mosaic-"+name+".service", "StatusText"); strings.Contains(s, "forged") {
			t.Errorf("systemd took the command's notification: StatusText %q", s)
		}
	})
	t.Run("guard", func(t *testing.T) {
		withoutScoping(t)
		name := sessionName(t)
		marker := filepath.Join(ws, "ran-"+name)
		r := mosaicWith(t, noBwrap, "", "start", "--json", "--sandbox", "landlock", "--direct", "--name", name, "--workspace", ws, "--", "touch", marker)
		code, msg := jsonError(t, r)
		if r.code != 1 || code != "start-failed" || !strings.Contains(msg, "refusing to run the command") || !strings.Contains(msg, "Landlock ABI 5") {
			t.Errorf("exit %d code %q message %q; want 1 start-failed with the guard's reason", r.code, code, msg)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the command ran without its Landlock ruleset")
		}
		if u := mosaicUnits(t); strings.Contains(u, name) {
			t.Errorf("unit left behind: %s", u)
		}
	})
}

// scopeScript answers, from inside a session, whether it reached the host's
// abstract socket and could signal the session's init (outside the
// command's Landlock domain), and runs a nested bwrap as Codex and Claude
// Code do.
const scopeScript = `
abstract=$1
c() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n allowed"; else echo "$n denied"; fi; }
c host-abstract sh -c "timeout 5 socat -u ABSTRACT-CONNECT:$abstract - | grep -q abstract-hello"
c signal-init kill -0 1
c nested-bwrap bwrap --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 --proc /proc --dev /dev --unshare-all --die-with-parent -- /usr/bin/true
`

// TestScoping: a --network host session (which shares the host's network
// namespace) cannot reach an abstract socket listening on the host nor
// signal outside its command, which the same session can without the
// scoping (a kernel without it, faked); a nested bwrap works either way.
func TestScoping(t *testing.T) {
	needRig(t)
	abstract := "mosaic-test-" + randomHex()
	ab, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer ab.Close()
	go serve(ab, "abstract-hello")
	if got := readLine(t, "unix", "@"+abstract); got != "abstract-hello" {
		t.Fatalf("stand-in abstract socket from the host: %q", got)
	}
	check := func(t *testing.T) map[string]string {
		r := mosaic(t, "run", "--network", "host", "--workspace", workspace(t), "--", "sh", "-c", scopeScript, "sh", abstract)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		return escapes.Parse(r.stdout) // "NAME ANSWER" lines, as the escape table's
	}
	for _, tc := range []struct {
		name    string
		scoping bool
		want    map[string]string
	}{
		{"unscoped-broken", false, map[string]string{"host-abstract": "allowed", "signal-init": "allowed", "nested-bwrap": "allowed"}},
		{"scoped", true, map[string]string{"host-abstract": "denied", "signal-init": "denied", "nested-bwrap": "allowed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.scoping {
				withoutScoping(t)
			}
			got := check(t)
			for k, want := range tc.want {
				if got[k] != want {
					t.Errorf("%s: %q, want %s (all: %v)", k, got[k], want, got)
				}
			}
		})
	}
}

// TestDoctorLandlock: on a host where bwrap cannot run, doctor --sandbox
// landlock --probe is healthy, runs the probe in that mode and reports its
// known gaps as such; it prints the mode's rows. A session in that mode
// says so in mosaic status.
func TestDoctorLandlock(t *testing.T) {
	needRig(t)
	d, code := runDoctor(t, noBwrap, "--sandbox", "landlock", "--probe")
	if code != 0 || !d.OK || len(d.Probe.Answers) != 16 {
		t.Fatalf("doctor --sandbox landlock --probe without bwrap: exit %d, %+v", code, d)
	}
	if status(d, "bwrap") != "warn" || status(d, "landlock") != "ok" {
		t.Errorf("bwrap %s, landlock %s; want warn and ok", status(d, "bwrap"), status(d, "landlock"))
	}
	wants := wantLandlock(t)
	for _, a := range d.Probe.Answers {
		want := wants[a.Name]
		if !a.OK || a.Got != want {
			t.Errorf("probe %s: %s (ok %v), want %s", a.Name, a.Got, a.OK, want)
		}
	}
	r := mosaicWith(t, noBwrap, "", "doctor", "--sandbox", "landlock")
	if !strings.Contains(r.stdout, "! processes") {
		t.Errorf("doctor --sandbox landlock does not show the mode's rows:\n%s", r.stdout)
	}

	name := sessionName(t)
	mustMosaic(t, "start", "--sandbox", "landlock", "--direct", "--name", name, "--workspace", workspace(t), "--", "sleep", "300")
	defer mosaic(t, "stop", name)
	r = mosaic(t, "status", name)
	if !strings.Contains(r.stdout, "no bwrap") || !strings.Contains(r.stdout, "! processes") {
		t.Errorf("status of a landlock session does not say what it confines:\n%s", r.stdout)
	}
	r = mosaic(t, "status", "--json", name)
	if !strings.Contains(r.stdout, `"sandbox": "landlock"`) {
		t.Errorf("status --json lacks the mode:\n%s", r.stdout)
	}
}
