package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

type sessionDoc struct {
	Name       string
	Unit       string
	State      string
	SubState   string `json:"sub_state"`
	Result     string
	MainPID    uint32 `json:"main_pid"`
	ExitStatus *int   `json:"exit_status"`
	Signal     string
	PIDs       []uint32
	Workspace  string
	GivenAs    string `json:"workspace_given_as"`
	Command    []string
	Binds      []struct{ Kind, Src, Dst, Reason string }
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, s)
	}
	return v
}

func TestStartStatusListStop(t *testing.T) {
	needRig(t)
	t.Parallel()
	ws := workspace(t)
	name := sessionName(t)
	// The command shuts down cleanly on SIGTERM and leaves proof of it.
	script := `trap 'echo got-term; echo bye > "$PWD/bye"; exit 0' TERM; echo started; while :; do sleep 0.05; done`
	start := decode[sessionDoc](t, mustMosaic(t, "start", "--direct", "--json", "--name", name, "--workspace", ws, "--", "sh", "-c", script).stdout)
	if start.State != "active" || start.MainPID == 0 || start.Unit != "mosaic-"+name+".service" {
		t.Fatalf("start returned %+v, want an active unit with a main PID", start)
	}
	// systemd is the registry: systemctl sees the session in mosaic.slice.
	unit := start.Unit
	if got := unitProperty(t, unit, "ActiveState"); got != "active" {
		t.Fatalf("systemctl says %s is %q", unit, got)
	}
	if got := unitProperty(t, unit, "Slice"); got != "mosaic.slice" {
		t.Errorf("slice %q, want mosaic.slice", got)
	}
	if got := unitProperty(t, unit, "MainPID"); got != strconv.Itoa(int(start.MainPID)) {
		t.Errorf("systemctl MainPID %s, mosaic said %d", got, start.MainPID)
	}

	st := decode[sessionDoc](t, mustMosaic(t, "status", "--json", name).stdout)
	if st.State != "active" || st.Workspace != ws || len(st.PIDs) < 3 || len(st.Binds) == 0 {
		t.Errorf("status = %+v, want active, the workspace, bwrap+init+command PIDs and the binds", st)
	}
	for _, b := range st.Binds {
		if b.Reason == "" {
			t.Errorf("bind %+v without a reason in status", b)
		}
	}
	text := mustMosaic(t, "status", name).stdout
	for _, want := range []string{"active (running)", ws, "the workspace, read-write", "systemctl --user status " + unit} {
		if !strings.Contains(text, want) {
			t.Errorf("status text lacks %q:\n%s", want, text)
		}
	}

	list := decode[[]sessionDoc](t, mustMosaic(t, "list", "--json").stdout)
	found := false
	for _, s := range list {
		found = found || (s.Name == name && s.State == "active" && s.MainPID == start.MainPID)
	}
	if !found {
		t.Errorf("list does not show %s active: %+v", name, list)
	}
	if !strings.Contains(mustMosaic(t, "list").stdout, name) {
		t.Error("list text lacks the session")
	}

	eventually(t, 5*time.Second, "the command to log its start", func() bool {
		out, _ := exec.Command("journalctl", "--user", "-u", unit, "-o", "cat", "--no-pager").Output()
		return strings.Contains(string(out), "started")
	})

	stop := decode[sessionDoc](t, mustMosaic(t, "stop", "--json", name).stdout)
	if stop.State != "inactive" {
		t.Errorf("stop returned %+v, want inactive", stop)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "bye")); err != nil || strings.TrimSpace(string(b)) != "bye" {
		t.Errorf("the command did not get to shut down on SIGTERM: %v", err)
	}
	// Afterwards nothing of the session runs: systemd has no unit, so no cgroup.
	if got := unitProperty(t, unit, "ActiveState"); got != "inactive" {
		t.Errorf("after stop, systemctl says %q", got)
	}
	for _, pid := range st.PIDs {
		if _, err := os.Stat("/proc/" + strconv.Itoa(int(pid))); err == nil {
			t.Errorf("process %d of the session is still alive after stop", pid)
		}
	}
}

func TestStopEscalatesToSIGKILL(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t)
	ws := workspace(t)
	// start returns once the command runs, not once its trap is set: it
	// says when, or SIGTERM could kill it before it ignores SIGTERM.
	mustMosaic(t, "start", "--direct", "--name", name, "--workspace", ws, "--", "sh", "-c", `trap "" TERM; touch "$PWD/ready"; while :; do sleep 0.05; done`)
	eventually(t, 5*time.Second, "the command to ignore SIGTERM", func() bool {
		_, err := os.Stat(filepath.Join(ws, "ready"))
		return err == nil
	})
	began := time.Now()
	r := mustMosaic(t, "stop", "--json", "--timeout", "1s", name)
	took := time.Since(began)
	if took < time.Second || took > 8*time.Second {
		t.Errorf("stop of a session ignoring SIGTERM took %v, want about the 1s timeout", took)
	}
	s := decode[sessionDoc](t, r.stdout)
	if s.Signal != "SIGKILL" {
		t.Errorf("stopped session %+v, want killed by SIGKILL", s)
	}
	if units := mosaicUnits(t); strings.Contains(units, name) {
		t.Errorf("unit left behind after stop: %s", units)
	}
}

func TestSystemctlStopIsSeen(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t)
	mustMosaic(t, "start", "--name", name, "--workspace", workspace(t), "--", "sleep", "300")
	if out, err := exec.Command("systemctl", "--user", "stop", "mosaic-"+name+".service").CombinedOutput(); err != nil {
		t.Fatalf("systemctl --user stop: %v %s", err, out)
	}
	s := decode[sessionDoc](t, mustMosaic(t, "status", "--json", name).stdout)
	if s.State != "inactive" {
		t.Errorf("after systemctl stop, mosaic status says %+v", s)
	}
	for _, l := range decode[[]sessionDoc](t, mustMosaic(t, "list", "--json").stdout) {
		if l.Name == name {
			t.Errorf("list still shows the stopped session: %+v", l)
		}
	}
}

func TestSessionExists(t *testing.T) {
	needRig(t)
	t.Parallel()
	ws := workspace(t)
	name := sessionName(t)
	first := decode[sessionDoc](t, mustMosaic(t, "start", "--json", "--name", name, "--workspace", ws, "--", "sleep", "300").stdout)
	r := mosaic(t, "start", "--json", "--name", name, "--workspace", ws, "--", "sleep", "1")
	if r.code != 3 {
		t.Fatalf("second start with the same name: exit %d, want 3\n%s%s", r.code, r.stdout, r.stderr)
	}
	if code, _ := jsonError(t, r); code != "session-exists" {
		t.Errorf("code %q, want session-exists", code)
	}
	// Nothing changed: the first session runs on, with the same main process.
	if got := unitProperty(t, first.Unit, "MainPID"); got != strconv.Itoa(int(first.MainPID)) {
		t.Errorf("first session's main PID is now %s, was %d", got, first.MainPID)
	}
	text := mosaic(t, "start", "--name", name, "--workspace", ws, "--", "true")
	if text.code != 3 || !strings.Contains(text.stderr, "already active") || strings.Count(strings.TrimSpace(text.stderr), "\n") != 0 {
		t.Errorf("text refusal: exit %d, stderr %q; want one line saying it is already active", text.code, text.stderr)
	}
}

func TestStopUnknownAndForeign(t *testing.T) {
	needRig(t)
	t.Parallel()
	r := mosaic(t, "stop", "--json", "t-never-was")
	if r.code != 3 {
		t.Fatalf("stop of an unknown session: exit %d, want 3", r.code)
	}
	if code, _ := jsonError(t, r); code != "no-such-session" {
		t.Errorf("code %q, want no-such-session", code)
	}
	// A unit named like a session but not made by mosaic is never touched.
	foreign := "t-foreign-" + randomHex()
	unit := "mosaic-" + foreign + ".service"
	if out, err := exec.Command("systemd-run", "--user", "--unit", unit, "sleep", "300").CombinedOutput(); err != nil {
		t.Fatalf("systemd-run: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("systemctl", "--user", "stop", unit).Run() })
	r = mosaic(t, "stop", "--json", foreign)
	if r.code != 3 {
		t.Errorf("stop of a foreign unit: exit %d, want 3 (%s)", r.code, r.stdout)
	}
	if got := unitProperty(t, unit, "ActiveState"); got != "active" {
		t.Errorf("foreign unit is %q after mosaic stop, want untouched", got)
	}
	for _, s := range decode[[]sessionDoc](t, mustMosaic(t, "list", "--json").stdout) {
		if s.Name == foreign {
			t.Error("list shows a unit mosaic did not make")
		}
	}
}

func TestRun(t *testing.T) {
	needRig(t)
	t.Parallel()
	ws := workspace(t)
	// The commands go by names of this test's own (links in the workspace,
	// which the session sees at the same path), so the sessions' generated
	// names carry tag and the check below sees only this test's units, not
	// the failed ones other tests make on purpose at the same time.
	tag := randomHex()
	link := func(name, target string) string {
		p := filepath.Join(ws, name+"-"+tag)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sh, printf := link("sh", "/bin/sh"), link("printf", "/usr/bin/printf")
	t.Run("exit code and stdio", func(t *testing.T) {
		r := mosaicWith(t, nil, "from-stdin\n", "run", "--workspace", ws, "--", sh, "-c", `read line; echo "out:$line"; echo err >&2; exit 7`)
		if r.code != 7 || r.stdout != "out:from-stdin\n" || r.stderr != "err\n" {
			t.Errorf("run: exit %d, stdout %q, stderr %q; want 7, the line read from stdin, err", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("signal death is 128+n", func(t *testing.T) {
		if r := mosaic(t, "run", "--workspace", ws, "--", sh, "-c", `kill -TERM $$`); r.code != 143 {
			t.Errorf("command killed by SIGTERM: exit %d, want 143", r.code)
		}
		if r := mosaic(t, "run", "--workspace", ws, "--", sh, "-c", `kill -KILL $$`); r.code != 137 {
			t.Errorf("command killed by SIGKILL: exit %d, want 137", r.code)
		}
	})
	t.Run("command not found", func(t *testing.T) {
		missing := "no-such-command-" + tag
		r := mosaic(t, "run", "--workspace", ws, "--", missing)
		if r.code != 127 || !strings.Contains(r.stderr, missing) {
			t.Errorf("exit %d, stderr %q; want 127 naming the command", r.code, r.stderr)
		}
	})
	t.Run("dollar signs reach the command untouched", func(t *testing.T) {
		r := mosaic(t, "run", "--workspace", ws, "--", printf, "%s|%s", "$HOME", "${USER}")
		if r.stdout != "$HOME|${USER}" {
			t.Errorf("systemd expanded the arguments: %q", r.stdout)
		}
	})
	t.Run("json", func(t *testing.T) {
		// stdout is the command's; the document goes to stderr.
		r := mosaic(t, "run", "--json", "--workspace", ws, "--", sh, "-c", "echo from-the-command; exit 3")
		s := decode[sessionDoc](t, r.stderr)
		if r.code != 3 || s.ExitStatus == nil || *s.ExitStatus != 3 || r.stdout != "from-the-command\n" {
			t.Errorf("run --json: exit %d, stdout %q, %+v", r.code, r.stdout, s)
		}
	})
	// A finished run leaves no unit behind, failed or not, and no state
	// without --name.
	for _, line := range strings.Split(mosaicUnits(t), "\n") {
		if strings.Contains(line, tag) {
			t.Errorf("run left a unit behind: %s", line)
		}
	}
	for _, e := range sessionEntries() {
		if strings.Contains(e, tag) {
			t.Errorf("run without --name left state behind: %s", e)
		}
	}
}

func TestRunNamedKeepsHome(t *testing.T) {
	needRig(t)
	t.Parallel()
	ws := workspace(t)
	name := sessionName(t)
	mustMosaic(t, "run", "--name", name, "--workspace", ws, "--", "sh", "-c", `echo remembered > "$HOME/note"; echo x > /tmp/scratch`)
	r := mustMosaic(t, "run", "--name", name, "--workspace", ws, "--", "sh", "-c", `cat "$HOME/note"; ls /tmp`)
	if r.stdout != "remembered\n" {
		t.Errorf("second run of %s: %q, want the home kept and /tmp emptied", name, r.stdout)
	}
	if u := mosaicUnits(t); strings.Contains(u, name) {
		t.Errorf("named run left its unit: %s", u)
	}
}

func TestLimitsReachTheUnit(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t)
	mustMosaic(t, "start", "--name", name, "--workspace", workspace(t),
		"--memory-max", "256M", "--tasks-max", "64", "--cpu-quota", "50%", "--runtime-max", "1h", "--stop-timeout", "3s", "--", "sleep", "300")
	unit := "mosaic-" + name + ".service"
	for prop, want := range map[string]string{
		"MemoryMax": "268435456", "TasksMax": "64", "CPUQuotaPerSecUSec": "500ms", "RuntimeMaxUSec": "1h",
		"TimeoutStopUSec": "3s", "PrivateUsers": "yes", "PrivateTmp": "yes", "ProtectSystem": "strict",
		"NoNewPrivileges": "yes", "KillMode": "control-group", "SyslogIdentifier": "mosaic-" + name,
		"Type": "notify",
	} {
		if got := unitProperty(t, unit, prop); got != want {
			t.Errorf("%s = %q, want %q", prop, got, want)
		}
	}
	if got := unitProperty(t, unit, "TemporaryFileSystem"); !strings.Contains(got, homeDir()) || !strings.Contains(got, os.Getenv("XDG_RUNTIME_DIR")) {
		t.Errorf("TemporaryFileSystem = %q, want the home and the runtime dir", got)
	}
}

func TestRuntimeMaxStopsTheSession(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t)
	mustMosaic(t, "start", "--name", name, "--workspace", workspace(t), "--runtime-max", "1s", "--", "sleep", "300")
	unit := "mosaic-" + name + ".service"
	eventually(t, 10*time.Second, "the session to be stopped by its runtime limit", func() bool {
		s := unitProperty(t, unit, "ActiveState")
		return s == "inactive" || s == "failed"
	})
}

func TestWorkspaceSymlinkBindsRealPath(t *testing.T) {
	needRig(t)
	t.Parallel()
	ws := workspace(t)
	link := ws + "-link"
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(link) })
	name := sessionName(t)
	s := decode[sessionDoc](t, mustMosaic(t, "start", "--direct", "--json", "--name", name, "--workspace", link, "--", "sh", "-c", `pwd > out; sleep 300`).stdout)
	if s.Workspace != ws || s.GivenAs != link {
		t.Errorf("workspace %q given as %q; want the real path %q, given as %q", s.Workspace, s.GivenAs, ws, link)
	}
	if !strings.Contains(mustMosaic(t, "status", name).stdout, "a symlink") {
		t.Error("status text does not say the workspace was a symlink")
	}
	eventually(t, 5*time.Second, "the session to write its working directory", func() bool {
		b, _ := os.ReadFile(filepath.Join(ws, "out"))
		return strings.TrimSpace(string(b)) == ws
	})
}

func TestExtraBinds(t *testing.T) {
	needRig(t)
	t.Parallel()
	ro, rw := workspace(t), workspace(t)
	os.WriteFile(filepath.Join(ro, "data"), []byte("ro-data"), 0o600)
	r := mosaic(t, "run", "--workspace", workspace(t), "--ro", ro, "--rw", rw, "--", "sh", "-c",
		`cat "$1/data"; touch "$1/new" 2>/dev/null && echo ro-writable; touch "$2/new" && echo rw-ok`, "sh", ro, rw)
	if r.code != 0 || r.stdout != "ro-datarw-ok\n" {
		t.Errorf("extra binds: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(rw, "new")); err != nil {
		t.Error("the --rw write did not reach the host")
	}
}

// TestStartFailureSaysWhy: a session that dies before it is ready is
// reported with the job's and the unit's result and its first log lines, and
// leaves no unit and no state behind.
func TestStartFailureSaysWhy(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t)
	r := mosaic(t, "start", "--json", "--name", name, "--workspace", workspace(t), "--", "no-such-command-abc")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	code, msg := jsonError(t, r)
	for _, want := range []string{"did not start", "exit status 127", "no-such-command-abc: command not found"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if code != "start-failed" {
		t.Errorf("code %q, want start-failed", code)
	}
	if u := mosaicUnits(t); strings.Contains(u, name) {
		t.Errorf("failed start left its unit: %s", u)
	}
	if _, err := os.Stat(filepath.Join(stateRoot(), "sessions", name)); err == nil {
		t.Error("failed start left its state directory")
	}
}

// TestRunInterrupt: Ctrl-C (SIGINT to mosaic run) stops the session; the
// command gets SIGTERM through systemd and its init and shuts down, and
// mosaic then dies of SIGINT, as an interrupted command does (its shell
// says 130), whatever the command's own status (in --json).
func TestRunInterrupt(t *testing.T) {
	needRig(t)
	t.Parallel()
	ws := workspace(t)
	cmd := exec.Command(mosaicBin, "run", "--direct", "--workspace", ws, "--", "sh", "-c",
		`trap 'echo graceful > "$PWD/term"; exit 5' TERM; touch "$PWD/ready"; while :; do sleep 0.05; done`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the command to run", func() bool {
		_, err := os.Stat(filepath.Join(ws, "ready"))
		return err == nil
	})
	cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("run after Ctrl-C: %v, want a death by SIGINT", cmd.ProcessState)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "term")); string(b) != "graceful\n" {
		t.Error("the command did not get SIGTERM to shut down")
	}
}

// TestInitReapsOrphans: the init is PID 1 of the session and reaps the
// orphans the command leaves; none stays a zombie.
func TestInitReapsOrphans(t *testing.T) {
	needRig(t)
	t.Parallel()
	r := mosaic(t, "run", "--workspace", workspace(t), "--", "sh", "-c",
		`for i in 1 2 3; do (sleep 0.01 &) ; done; sleep 0.3; grep -l '^State:.*Z' /proc/[0-9]*/status | wc -l; cat /proc/1/cmdline | tr '\0' ' '`)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "0\n/run/mosaic/init init ") {
		t.Errorf("exit %d, stdout %q: want no zombies and mosaic's init as PID 1", r.code, r.stdout)
	}
}

// TestPrivateSocketFallback: without a reachable user bus, mosaic talks to
// the manager's private socket, where it must work just as well.
func TestPrivateSocketFallback(t *testing.T) {
	needRig(t)
	t.Parallel()
	env := []string{"DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent/bus"}
	ws := workspace(t)
	if r := mosaicWith(t, env, "in\n", "run", "--workspace", ws, "--", "sh", "-c", "cat; exit 4"); r.code != 4 || r.stdout != "in\n" {
		t.Errorf("run over the private socket: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	name := sessionName(t)
	if r := mosaicWith(t, env, "", "start", "--name", name, "--workspace", ws, "--", "sleep", "300"); r.code != 0 {
		t.Fatalf("start over the private socket: %s", r.stderr)
	}
	if r := mosaicWith(t, env, "", "stop", "--json", name); r.code != 0 || !strings.Contains(r.stdout, `"inactive"`) {
		t.Errorf("stop over the private socket: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
}
