package manager

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"mosaic/sandbox"
	"mosaic/units"
	"mosaic/units/errcode"
)

// A `mosaic run` of the service path ties its session to its own lifetime:
// it starts a tie, a small child of its own (the stage binary's sandbox.TieStage: a small
// binary, a cheap start)
// that lives until its stdin, a pipe only the run holds, reaches EOF; the
// child is put into a scope of its own in the start's call
// (units.TieScope) and the session's unit is BindsTo= that scope. The run
// killed, even by SIGKILL, closes the pipe: the child exits, its scope
// empties and ends, and systemd stops the session; nothing runs unwatched,
// and gc takes what is left. (A scope run holds already: its bwrap dies
// with mosaic.)

// tie is a running tie process.
type tie struct {
	cmd *exec.Cmd
	w   *os.File // the pipe's write end: closing it ends the tie
}

// startTie starts the tie from stageBin.
func startTie(stageBin string) (*tie, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, errcode.Unexpected.New("cannot make the pipe that ties the session to this run: %v", err)
	}
	cmd := exec.Command(stageBin, sandbox.TieStage)
	cmd.Stdin = r
	// A process group of its own: the terminal's Ctrl-C is the run's to
	// handle (it stops the session and reports how), not the tie's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, errcode.Unexpected.New("cannot start %s %s, which ties the session to this run: %v", stageBin, sandbox.TieStage, err)
	}
	return &tie{cmd: cmd, w: w}, nil
}

// pid is the tie's PID, for its scope.
func (t *tie) pid() uint32 { return uint32(t.cmd.Process.Pid) }

// end lets the tie go (its scope ends; a session still running is stopped).
func (t *tie) end() {
	if t == nil {
		return
	}
	t.w.Close()
	_ = t.cmd.Wait()
}

func (t *tie) String() string { return fmt.Sprintf("tie %d", t.cmd.Process.Pid) }

// stopTie stops session name's tie scope and waits for that, once the
// session ended: a finished run leaves no unit behind, and the scope would
// otherwise end only when systemd hears that its cgroup is empty, after
// the run returned.
func (m *Manager) stopTie(ctx context.Context, name string) {
	unit := units.TieScopeName(name)
	defer m.jobsOf(unit)() // its job's end is all that is waited for
	ch := make(chan string, 1)
	cctx, cancel := bounded(ctx)
	defer cancel()
	if _, err := m.conn.StopUnitContext(cctx, unit, "replace", ch); err != nil {
		return // gone already (its tie exited), or systemd cannot be asked
	}
	select {
	case <-ch:
	case <-cctx.Done():
	case <-m.gone():
	}
}
