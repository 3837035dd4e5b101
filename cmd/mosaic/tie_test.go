package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRunIsItsOwnTie (issue 32): a service-path mosaic run ties its
// session to itself with no process of its own for that: the run's own
// process is in its tie scope, mosaic-NAME.run-PID.scope, which the
// session's unit is BindsTo=. A systemctl --user stop of that scope stops
// the session, and the run then ends with nothing left; a second run of the
// same name right after a first one starts (the first one's scope, ending as
// it exits, has another name).
func TestRunIsItsOwnTie(t *testing.T) {
	needRig(t)
	name := sessionName(t)
	cmd := exec.Command(mosaicBin, "run", "--pty=false", "--name", name, "-w", workspace(t), "--", "sh", "-c", "echo up; exec sleep 300")
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	buf := make([]byte, 3)
	if _, err := io.ReadFull(stdout, buf); err != nil {
		t.Fatalf("the run did not start: %v\n%s", err, stderr.String())
	}
	scope := fmt.Sprintf("mosaic-%s.run-%d.scope", name, cmd.Process.Pid)
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(cg)), "/"+scope) {
		t.Fatalf("the run's cgroup is %q (%v), want its tie scope %s", cg, err, scope)
	}
	unit := "mosaic-" + name + ".service"
	if b := unitProperty(t, unit, "BindsTo"); !strings.Contains(b, scope) {
		t.Fatalf("%s is BindsTo=%q, want its run's scope %s", unit, b, scope)
	}
	if strings.Contains(mustMosaic(t, "list").stdout, ".run-") {
		t.Errorf("list shows the run's tie scope")
	}
	done := make(chan error, 1)
	go func() { io.Copy(io.Discard, stdout); done <- cmd.Wait() }()
	systemctl(t, "stop", scope)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the run did not end after its tie scope was stopped:\n%s", stderr.String())
	}
	if st := unitProperty(t, unit, "ActiveState"); st == "active" || st == "activating" || st == "deactivating" {
		t.Errorf("the session is %s after its run's scope was stopped", st)
	}
	if u := mosaicUnits(t); strings.Contains(u, name) {
		t.Errorf("units left after the run: %s", u)
	}
	for i := 0; i < 2; i++ {
		mustMosaic(t, "run", "--pty=false", "--name", name, "-w", workspace(t), "--", "true")
	}
	if u := mosaicUnits(t); strings.Contains(u, name) {
		t.Errorf("units left after two runs: %s", u)
	}
	mosaic(t, "rm", name)
}
