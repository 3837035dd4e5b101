package manager

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"mosaic/sandbox"
)

// homeState writes the home.json an init writes, in state s.
func homeState(t *testing.T, dir, s string) {
	t.Helper()
	b, _ := json.Marshal(sandbox.HomeReport{State: s, At: time.Now()})
	if err := os.WriteFile(filepath.Join(dir, sandbox.HomeReportName), b, 0o600); err != nil {
		t.Error(err)
	}
}

// At a stop too short for the init's own kill-after, the command of a
// session whose kept home is loaded is killed (every process of the unit
// but its init, its main process), so that the init saves the home; the
// stop then waits for the save to begin. A home not loaded, or none, is
// nobody's to save: nothing is killed.
func TestKillCommandForSave(t *testing.T) {
	f, m := stopFixture(t)
	dir := m.paths.SessionDir("x")
	start := func() *exec.Cmd {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	init, command := start(), start()
	f.pids = map[string][]uint32{"mosaic-x.service": {uint32(init.Process.Pid), uint32(command.Process.Pid)}}
	s := Session{Name: "x", MainPID: uint32(init.Process.Pid)}

	m.killCommandForSave(context.Background(), s, "mosaic-x.service", dir) // no home.json
	homeState(t, dir, sandbox.HomeSaved)
	m.killCommandForSave(context.Background(), s, "mosaic-x.service", dir)
	for _, c := range []*exec.Cmd{init, command} {
		if killed(c.Process.Pid) {
			t.Fatalf("process %d was killed with no home to save", c.Process.Pid)
		}
	}

	homeState(t, dir, sandbox.HomeRunning)
	ended := make(chan error, 1)
	go func() {
		ended <- command.Wait()
		homeState(t, dir, sandbox.HomeInSave) // the init saw it end
	}()
	began := time.Now()
	m.killCommandForSave(context.Background(), s, "mosaic-x.service", dir)
	select {
	case err := <-ended:
		if ws, ok := command.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Errorf("the command ended %v, want SIGKILL", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command was not killed")
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("the wait for the save took %v: it did not see the save begin", took)
	}
	if killed(init.Process.Pid) {
		t.Error("the init was killed")
	}
}

// killed reports whether child pid, not yet waited for, has ended: it
// turns zombie within a moment of a SIGKILL (looked for over 300 ms).
func killed(pid int) bool {
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if i := bytes.LastIndexByte(b, ')'); err != nil || i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return true
		}
	}
	return false
}
