package bus

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"mosaic/credentials"
	"mosaic/internal/errcode"
	"mosaic/manager/records"
	"mosaic/units"
)

// caller is who is on the other end of a connection.
type caller struct {
	session    string // "" for the user outside any session
	invocation string // the session unit's invocation id: who owns what it launched
	mayLaunch  bool
	workspace  string
	copied     bool     // the caller works on a copy of its workspace (clone mode)
	gitLent    []string // the repositories the caller was lent (its record's git_lent)
	// buildEnv are the build settings the caller was given at its start
	// (its record's environment), which a session it launches gets.
	buildEnv map[string]string
	err      error // the caller cannot be served at all
}

func (c caller) String() string {
	if c.session == "" {
		return "user"
	}
	return "session " + c.session
}

// key is what the bus counts a caller's connections by.
func (c caller) key() string { return c.session + "@" + c.invocation }

// soPeerPIDFD is SO_PEERPIDFD (Linux 6.5, asm-generic/socket.h): a pidfd of
// the process that connected. golang.org/x/sys does not name it yet.
const soPeerPIDFD = 77

// identify asks the kernel who connected and systemd which unit that
// process is in. Where the manager has GetUnitByPIDFD (253+) and the kernel
// SO_PEERPIDFD (6.5+), the lookup is by pidfd: systemd checks that the
// process is still the one the pidfd names. Elsewhere it is by PID
// (SO_PEERCRED), with the process's start time read before and after the
// lookup, so that a PID reused meanwhile is refused.
func (b *bus) identify(ctx context.Context, conn *net.UnixConn) caller {
	raw, err := conn.SyscallConn()
	if err != nil {
		return caller{err: err}
	}
	var cred *unix.Ucred
	var credErr error
	pidfd, pidfdErr := -1, error(nil)
	_ = raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if b.m.Features().UnitByPIDFD {
			pidfd, pidfdErr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, soPeerPIDFD)
		}
	})
	if pidfd >= 0 && pidfdErr == nil {
		defer unix.Close(pidfd)
	} else {
		pidfd = -1
	}
	if credErr != nil {
		return caller{err: credErr}
	}
	if int(cred.Uid) != os.Getuid() {
		return caller{err: errcode.NotPermitted.New("the mosaic bus serves only its own user")}
	}
	if pidfd >= 0 {
		unit, invocation, err := b.m.UnitByPIDFD(ctx, pidfd)
		return b.callerOf(unit, invocation, err)
	}
	// The PID is the connecting process's; it may have handed the socket on
	// and exited, and its PID be reused. So the process must still be the
	// same one (its start time) after systemd has said which unit it is in.
	gone := caller{err: errcode.NotPermitted.New("the process that connected to the bus is gone: connect from the process that asks")}
	started, ok := b.procStart(int(cred.Pid))
	if !ok {
		return gone
	}
	unit, invocation, err := b.m.UnitByPID(ctx, uint32(cred.Pid))
	if again, ok := b.procStart(int(cred.Pid)); !ok || again != started {
		return gone
	}
	return b.callerOf(unit, invocation, err)
}

// callerOf is the caller in unit. Only systemd's word that the process is
// in no unit makes it the user's own; any other error (a timeout, a closed
// connection) says nothing of who asks, and is a refusal.
func (b *bus) callerOf(unit, invocation string, err error) caller {
	if errors.Is(err, errcode.NoSuchSession.Target()) {
		return caller{}
	}
	if err != nil {
		return caller{err: errcode.NotPermitted.New("cannot tell which unit the caller is in, so the bus refuses: %v", errcode.Of(err).Message)}
	}
	name, _ := units.SessionName(unit)
	if name == "" {
		return caller{}
	}
	if invocation == "" {
		return caller{err: errcode.NotPermitted.New("systemd gave no invocation id for %s, so the bus cannot tell this session from an earlier one of its name", unit)}
	}
	c := caller{session: name, invocation: invocation, buildEnv: map[string]string{}}
	if rec, ok := records.Read(b.paths.SessionDir(name)); ok {
		c.mayLaunch, c.workspace, c.copied, c.gitLent = rec.MayLaunch, rec.Workspace, rec.WorkspaceCopied, rec.GitLent
		c.buildEnv = credentials.BuildEnvIn(rec.Environment)
	}
	return c
}

// procStart is a process's start time (field 22 of /proc/PID/stat).
func procStart(pid int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false
	}
	// The command name (field 2) may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return "", false
	}
	return fields[19], true
}
