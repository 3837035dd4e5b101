package manager

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/internal/testhook"
	"mosaic/manager/session"
	"mosaic/sandbox"
)

// killCommandForSave, at a stop's timeout shorter than the init's own
// kill-after (mosaic stop --timeout 2s), kills the command of a session
// whose init is to save a kept home (its home.json says running): every
// process of the unit but the init and the bwrap that started it, so that
// the init sees its command end and saves the home before the unit's
// SIGKILL. It then waits, up to a few seconds, for the save to begin (or
// end). A process that passes for the init (a forged name) only escapes
// this kill: the unit's SIGKILL follows as before.
func (m *Manager) killCommandForSave(ctx context.Context, s Session, unit, dir string) {
	if h := session.HomeOf(dir); h == nil || h.State != sandbox.HomeRunning || s.MainPID == 0 || testhook.Flag("MOSAIC_TEST_NO_KILL_AFTER") {
		return // (the hook: the weakened stop, as before issue 40)
	}
	main := int(s.MainPID)
	comm, _ := os.ReadFile("/proc/" + strconv.Itoa(main) + "/comm")
	underBwrap := strings.TrimSpace(string(comm)) == "bwrap"
	killed := false
	for _, p := range m.pidsAsync(ctx, unit)() {
		pid := int(p)
		if pid == main || (underBwrap && parentOf(pid) == main) {
			continue // the init (the main process, or bwrap's child)
		}
		_ = unix.Kill(pid, unix.SIGKILL)
		killed = true
	}
	if !killed {
		return
	}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if h := session.HomeOf(dir); h == nil || h.State != sandbox.HomeRunning {
			return
		}
	}
}
