package main

// The tests in this package run the real mosaic binary against a real
// systemd user manager, D-Bus, journald and bwrap: the user's own on a
// desktop, the one contrib/rig.sh boots elsewhere (make test does that).
// Without them they skip, naming what is missing; under CI they fail.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	mosaicBin  string // the binary under test, built by TestMain
	rigMissing string // why the real components are not there, or ""
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "probe-") { // a copy of this binary inside a session
		os.Exit(probeMain(os.Args[1], os.Args[2:]))
	}
	rigMissing = missingComponents()
	if rigMissing == "" {
		dir, err := os.MkdirTemp(homeDir(), ".mosaic-test-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		mosaicBin = filepath.Join(dir, "mosaic")
		if err := buildPair(dir, buildTags); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// buildPair builds mosaic and its stage binary (cmd/mosaic-stage) into
// dir, in one go build with the same tags, as make build does: a pair
// manager/stagebin takes for one build.
func buildPair(dir, tags string) error {
	build := exec.Command("go", "build", "-tags", tags, "-o", dir+"/", ".", "../mosaic-stage", "../mosaic-net")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building mosaic, mosaic-stage and mosaic-net -tags %s: %v\n%s", tags, err, out)
	}
	return nil
}

func homeDir() string {
	h, _ := os.UserHomeDir()
	return h
}

func missingComponents() string {
	rt := os.Getenv("XDG_RUNTIME_DIR")
	if rt == "" {
		return "XDG_RUNTIME_DIR is not set (no systemd user manager)"
	}
	if _, err := os.Stat(filepath.Join(rt, "systemd", "private")); err != nil {
		return "no systemd user manager socket at " + filepath.Join(rt, "systemd", "private")
	}
	for _, b := range []string{"bwrap", "journalctl", "systemctl", "go"} {
		if _, err := exec.LookPath(b); err != nil {
			return b + " is not on PATH"
		}
	}
	return ""
}

// needRig skips a test that needs the real components when they are missing,
// and fails it under CI, where they must be there.
func needRig(t *testing.T) {
	t.Helper()
	if rigMissing == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI must run the real tests, but %s: run them through `make test` (contrib/rig.sh)", rigMissing)
	}
	t.Skipf("needs a real systemd user manager, D-Bus, journald and bwrap: %s (run `make test`, which boots contrib/rig.sh)", rigMissing)
}

type result struct {
	stdout, stderr string
	code           int
}

// mosaic runs the binary under test with extra environment and stdin.
func mosaicWith(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(mosaicBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	return runResult(t, cmd)
}

// runResult runs cmd and returns its output and exit code.
func runResult(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = shellStatus(ee.ProcessState)
	} else if err != nil {
		t.Fatalf("running %v: %v", cmd.Args, err)
	}
	return result{out.String(), errb.String(), code}
}

// shellStatus is a process's end as a shell says it: its exit code, or
// 128+n for a death by signal n (mosaic dies of SIGINT after a Ctrl-C).
func shellStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func mosaic(t *testing.T, args ...string) result {
	t.Helper()
	return mosaicWith(t, nil, "", args...)
}

// mustMosaic runs mosaic and fails the test unless it exits 0.
func mustMosaic(t *testing.T, args ...string) result {
	t.Helper()
	r := mosaic(t, args...)
	if r.code != 0 {
		t.Fatalf("mosaic %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// jsonError reads the {"error": {...}} document of a failed --json call.
func jsonError(t *testing.T, r result) (code, message string) {
	t.Helper()
	var doc struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("stdout is not a JSON error document: %v\n%s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return doc.Error.Code, doc.Error.Message
}

func randomHex() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sessionName returns a fresh session name, and stops the session (if any)
// when the test ends.
func sessionName(t *testing.T) string {
	name := "t-" + randomHex()
	t.Cleanup(func() {
		exec.Command(mosaicBin, "stop", "--timeout", "2s", name).Run()
		os.RemoveAll(filepath.Join(stateRoot(), "sessions", name))
	})
	return name
}

// workspace makes a directory under the real home, where users keep their
// projects (the home is the one place a session must not otherwise see).
func workspace(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(homeDir(), "mosaic-test-ws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func stateRoot() string {
	if s := os.Getenv("XDG_STATE_HOME"); s != "" {
		return filepath.Join(s, "mosaic")
	}
	return filepath.Join(homeDir(), ".local", "state", "mosaic")
}

// systemctl runs systemctl --user and returns its trimmed output.
func systemctl(t *testing.T, args ...string) string {
	t.Helper()
	out, _ := exec.Command("systemctl", append([]string{"--user"}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out))
}

// unitProperty reads one property of a unit through systemctl, as an
// operator would.
func unitProperty(t *testing.T, unit, prop string) string {
	t.Helper()
	return systemctl(t, "show", "-P", prop, unit)
}

// mosaicUnits lists the units named mosaic-*.service or mosaic-*.scope
// that systemd has, once the tie scopes of runs that exited are gone: a
// run's own process is its tie scope's (mosaic-NAME.run-PID.scope), which
// ends when systemd hears that its cgroup emptied, just after the run
// exited. A run still alive keeps its scope in the list.
func mosaicUnits(t *testing.T) string {
	t.Helper()
	// The units that make spare copies (mosaic-spare.KEY.service) and
	// remove forgotten sessions' state (mosaic-remove.ID.service) are no
	// session's: they come and go after other tests' starts and removals.
	list := func() string {
		var keep []string
		for _, line := range strings.Split(systemctl(t, "list-units", "--all", "--plain", "--no-legend", "mosaic-*.service", "mosaic-*.scope"), "\n") {
			if !strings.HasPrefix(line, "mosaic-spare.") && !strings.HasPrefix(line, "mosaic-remove.") {
				keep = append(keep, line)
			}
		}
		return strings.Join(keep, "\n")
	}
	l := list()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left := ""
		for _, line := range strings.Split(l, "\n") {
			if pid, ok := tieScopePID(strings.Fields(line)); ok && !processAlive(pid) {
				left = strings.Fields(line)[0]
			}
		}
		if left == "" {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tie scope of an exited run is still there after 10s:\n%s\n%s", l, systemctl(t, "status", "--no-pager", left))
		}
		l = list()
	}
}

// tieScopePID is the run's PID in the name of a tie scope, the first of
// fields (a line of systemctl list-units).
func tieScopePID(fields []string) (int, bool) {
	if len(fields) == 0 || !strings.HasSuffix(fields[0], ".scope") {
		return 0, false
	}
	_, rest, ok := strings.Cut(strings.TrimSuffix(fields[0], ".scope"), ".run-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(rest)
	return pid, err == nil
}

// processAlive says whether process pid runs (a zombie counts as gone: its
// cgroup has let it go).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(after, "Z") && !strings.HasPrefix(after, "X")
}

// eventually polls cond for up to d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tagged are the test-only builds of mosaic, one per build tag, made once
// per test run.
var tagged = struct {
	sync.Mutex
	bins map[string]*taggedBuild
}{bins: map[string]*taggedBuild{}}

type taggedBuild struct {
	once sync.Once
	path string
	err  error
}

// taggedMosaic builds mosaic with a build tag only tests use (a weakened
// sandbox, test hooks), with its stage binary, in a directory of the tag's
// beside the binary under test, once; it returns that mosaic's path.
func taggedMosaic(t *testing.T, tag string) string {
	t.Helper()
	tagged.Lock()
	b := tagged.bins[tag]
	if b == nil {
		b = &taggedBuild{}
		tagged.bins[tag] = b
	}
	tagged.Unlock()
	b.once.Do(func() {
		dir := filepath.Join(filepath.Dir(mosaicBin), tag)
		b.path = filepath.Join(dir, "mosaic")
		b.err = buildPair(dir, buildTags+","+tag)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}
