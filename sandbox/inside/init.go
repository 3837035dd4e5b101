package inside

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/internal/testhook"
	"mosaic/sandbox"
	"mosaic/sandbox/publish"
)

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// Init is mosaic's init, PID 1 inside the sandbox. It checks the sandbox,
// starts the command with an allow-listed environment, reports readiness to
// systemd, forwards termination signals, reaps every orphan, and returns the
// command's exit status (128+n for a death by signal n).
func Init(args []string) int {
	// First: nothing of this process (its environment holds the promise and
	// the credentials) may be read or traced by the command.
	if err := Undumpable(); err != nil {
		return refuse(-1, "", err)
	}
	if len(args) == 2 && args[0] == sandbox.InitArgvFD {
		var err error
		if args, err = sandbox.ReadInitArgv(args[1]); err != nil {
			fmt.Fprintf(os.Stderr, "mosaic init: %v\n", err)
			return sandbox.ExitSandboxRefused
		}
	}
	o, ok := parseInitOptions(args)
	if !ok {
		fmt.Fprintln(os.Stderr, "mosaic init: usage: init --session NAME --home DIR [--pass VAR]... [--credential VAR]... -- COMMAND [ARG...]")
		return sandbox.ExitSandboxRefused
	}
	sigs, err := holdSignals(o)
	if err != nil {
		return refuse(-1, "", err)
	}
	stopBeforeHeard(sigs)
	notify := notifyFD()
	homeFD := takeHomeStore()
	closeInherited()
	promise, promiseErr := sandbox.DecodePromise(os.Getenv(sandbox.PromiseEnv))
	os.Unsetenv(sandbox.PromiseEnv)
	for _, c := range o.creds {
		if _, ok := os.LookupEnv(c); !ok {
			return refuse(notify, "credential "+c+" did not arrive", fmt.Errorf("credential %s did not arrive (its environment file was gone before the session started)", c))
		}
	}
	o.pass = append(o.pass, o.creds...)
	err = promiseErr
	var ruleset *LandlockRuleset
	if err == nil {
		ruleset, err = confineCommand(promise, o.landlock)
	}
	if err != nil {
		return refuse(notify, checkFailed+err.Error(), err)
	}
	home, err := loadHomeOf(homeFD, o)
	var env []string
	if err == nil {
		env, err = commandNetwork(o, sandbox.CommandEnv(os.Environ(), o.session, o.home, o.pass))
	}
	if err == nil {
		err = InstallSyscallFilter(o.seccompAllow)
	}
	if err != nil {
		return refuse(notify, "", err)
	}
	command := o.command
	path, err := lookPath(command[0], env)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mosaic init: %v\n", err)
		return 127
	}

	attr := &os.ProcAttr{Env: env, Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}}
	if o.tty {
		// The command leads a session of its own whose controlling terminal
		// is the PTY, in the foreground: Ctrl-C, Ctrl-Z and Ctrl-\ reach it
		// from the line discipline, and job control works inside.
		attr.Sys = &unix.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	proc, err := StartRestricted(ruleset, path, command, attr)
	var lerr *LandlockError
	if errors.As(err, &lerr) {
		return refuse(notify, checkFailed+err.Error(), err)
	}
	if errors.Is(err, unix.ENOEXEC) {
		fmt.Fprintf(os.Stderr, "mosaic init: cannot start %s: %s\n", command[0], NotAProgram(path))
		return 127
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mosaic init: cannot start %s: %v\n", command[0], err)
		return 127
	}
	notifyStatus(notify, "READY=1")
	if notify >= 0 {
		notifyBarrier(notify, notifyBarrierTimeout)
		home.keepNotify(notify)
	}
	if o.tty {
		go endOnHangup(proc.Pid)
	}
	return home.endWith(supervise(proc.Pid, o.tty, o.killAfter, sigs))
}

// checkFailed begins the unit's status line when a check of the sandbox
// failed (refuse).
const checkFailed = "sandbox check failed: "

// refuse is the init's refusal to run the command: it says why on stderr
// and, given a status, in the unit's status line (on systemd's
// notification descriptor notify; -1 before the init has taken it), and
// returns the exit status that says the command never ran.
func refuse(notify int, status string, err error) int {
	fmt.Fprintf(os.Stderr, "mosaic init: refusing to run the command: %v\n", err)
	if status != "" {
		notifyStatus(notify, "STATUS="+status)
	}
	return sandbox.ExitSandboxRefused
}

// loadHomeOf loads the session's home (loadHome) when the init was given
// its state directory; nil when not (--sandbox landlock: the home is on
// disk, no tmpfs).
func loadHomeOf(fd int, o initOptions) (*homeStore, error) {
	if fd < 0 {
		return nil, nil
	}
	return loadHome(fd, o.home, o.keepHome)
}

// commandNetwork starts what the command's network needs before it runs:
// the egress relay on loopback (listening before READY=1, so the command can
// use the proxy at once; env gets the proxy's variables) and the offers to
// the publish forwarder.
func commandNetwork(o initOptions, env []string) ([]string, error) {
	if o.relay {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(sandbox.ProxyPort))
		if err != nil {
			return nil, fmt.Errorf("cannot listen for the egress relay: %w", err)
		}
		go relayEgress(l, o.egressSocket)
		env = append(env, ProxyEnv(env)...)
	}
	if o.relay && o.tun {
		if err := startNetOnUse(o.egressSocket, o.netUpFront); err != nil {
			return nil, err
		}
	}
	if err := offerPublished(o.publish); err != nil {
		return nil, err
	}
	return env, nil
}

// holdSignals takes the signals the init forwards (from here on, held or
// not, none is lost), and, for a held scope (--go-fd), waits until mosaic
// lets it run.
func holdSignals(o initOptions) (chan os.Signal, error) {
	// No signal is lost (nor ends the init): each is forwarded to the
	// command once it runs, and SIGCHLD is there before the child.
	time.Sleep(o.slowStart)
	sigs := make(chan os.Signal, 16)
	if o.ignoreHeld {
		signal.Ignore(forwardedSignals...)
	} else {
		signal.Notify(sigs, append([]os.Signal{unix.SIGCHLD}, forwardedSignals...)...)
	}
	if o.goFD >= 0 {
		// Held: mosaic has not yet had systemd put this process into the
		// session's scope. A signal now is kept for the command, not
		// dropped: systemd's SIGTERM of a stop that began while held (mosaic
		// stop, systemctl --user stop) comes before its news over D-Bus,
		// which mosaic, looking before it lets the init run, may miss; the
		// command then ends on it at once instead of running until the stop
		// timeout's SIGKILL. (mosaic itself stops a held session with
		// SIGKILL.)
		if err := awaitGo(o.goFD, o.goOnEOF); err != nil {
			return nil, err
		}
	}
	if o.ignoreHeld {
		signal.Notify(sigs, append([]os.Signal{unix.SIGCHLD}, forwardedSignals...)...)
	}
	return sigs, nil
}

// initOptions are the init's arguments (see Init's flags).
type initOptions struct {
	goFD                      int
	goOnEOF, ignoreHeld       bool          // test hooks (testhook.Enabled only)
	netUpFront                bool          // a test hook too
	slowStart                 time.Duration // a test hook too
	session, home             string
	tty, relay, keepHome, tun bool
	killAfter                 time.Duration // --kill-after: SIGKILL this long after a SIGTERM
	landlock, egressSocket    string
	pass, creds, seccompAllow stringList
	publish                   stringList // --publish: session ports the forwarder hands connections to
	command                   []string   // after the options
}

// parseInitOptions reads the init's arguments; false when they are not
// the init's (no command among them).
func parseInitOptions(args []string) (initOptions, bool) {
	var o initOptions
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.IntVar(&o.goFD, sandbox.InitGoFD[2:], -1, "a scope's go socket: say on it that the init is held, then wait for one byte; EOF means mosaic is gone: refuse")
	if testhook.Enabled {
		fs.BoolVar(&o.goOnEOF, "test-go-on-eof", false, "test hook: run on EOF of --go-fd too (the weakened init)")
		fs.BoolVar(&o.ignoreHeld, "test-ignore-held", false, "test hook: ignore the forwarded signals while held (the weakened init)")
		fs.DurationVar(&o.slowStart, "test-slow-start", 0, "test hook: start this much slower (a sandbox or runtime still starting)")
		fs.BoolVar(&o.netUpFront, "test-net-up-front", false, "test hook: start the network device's mosaic-net with the command, not on its first use (as before issue 39)")
	}
	fs.StringVar(&o.session, "session", "", "session name")
	fs.StringVar(&o.home, "home", "", "HOME inside the sandbox")
	fs.BoolVar(&o.tty, "tty", false, "stdin is the session's own pseudo-terminal: make it the command's controlling terminal")
	fs.BoolVar(&o.keepHome, "keep-home", false, "save the home back to the state directory when the command has ended")
	fs.DurationVar(&o.killAfter, "kill-after", 0, "kill a command that has not ended this long after a SIGTERM (leaving the stop timeout's rest to save the home)")
	fs.BoolVar(&o.relay, "egress", false, "relay 127.0.0.1:3128 to the egress proxy's socket and point the command at it")
	fs.BoolVar(&o.tun, "tun", false, "with --egress: make the network device that takes every connection to the egress proxy (needs CAP_NET_ADMIN, dropped before the command)")
	fs.StringVar(&o.landlock, "landlock", "", "no bwrap: run the command under this Landlock policy (JSON)")
	fs.StringVar(&o.egressSocket, "egress-socket", sandbox.EgressSocketInside, "the egress proxy's socket")
	fs.Var(&o.pass, "pass", "extra variable to pass to the command")
	fs.Var(&o.creds, "credential", "credential that must have arrived, passed to the command")
	fs.Var(&o.seccompAllow, "seccomp-allow", "row of the syscall filter to lift")
	fs.Var(&o.publish, "publish", "a session port the host reaches through the publish forwarder's socket")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		return o, false
	}
	o.command = fs.Args()
	return o, true
}

// offerPublished starts the session's half of --publish (publish.Offer)
// for the ports given, before the command runs.
func offerPublished(published stringList) error {
	if len(published) == 0 {
		return nil
	}
	var ports []int
	for _, p := range published {
		n, err := strconv.Atoi(p)
		if err != nil {
			return fmt.Errorf("bad --publish %q", p)
		}
		ports = append(ports, n)
	}
	publish.Offer(publish.SocketInside, ports)
	return nil
}

// forwardedSignals are the signals the init forwards to the command.
var forwardedSignals = []os.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH, unix.SIGTSTP}

// awaitGo reads the one byte mosaic sends on fd once systemd has put the
// session into its scope. EOF is all a mosaic killed while the session was
// held leaves: the session would then run with nobody to relay its signals
// or record its end, and (the scope made) no check of the cgroup to stop
// it; it is a refusal, unless onEOF (the weakened init of a test).
func awaitGo(fd int, onEOF bool) error {
	// First, on the same socket: held, every signal kept from here on, which
	// mosaic waits for before it forwards any.
	b := [1]byte{1}
	if _, err := unix.Write(fd, b[:]); err != nil {
		unix.Close(fd)
		return fmt.Errorf("mosaic, which holds the session until systemd has put it into its scope, is gone (%w)", err)
	}
	for {
		n, err := unix.Read(fd, b[:])
		if err == unix.EINTR {
			continue
		}
		unix.Close(fd)
		if n == 1 || onEOF && n == 0 && err == nil {
			return nil
		}
		if err == nil {
			err = io.EOF
		}
		return fmt.Errorf("mosaic, which holds the session until systemd has put it into its scope, is gone (%w)", err)
	}
}

// hangupGrace is how long a command may take to end after its terminal hung
// up (mosaic, holding the other side, is gone) before the session is killed.
const hangupGrace = 3 * time.Second

// endOnHangup waits until the PTY on stdin hangs up, which happens when the
// mosaic holding its other side is gone: the session would have no terminal.
// The kernel sends SIGHUP to the command's session; one that ignores it is
// killed after hangupGrace (the init's exit ends the PID namespace).
func endOnHangup(pid int) {
	fds := []unix.PollFd{{Fd: 0, Events: 0}}
	for {
		_, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || fds[0].Revents&(unix.POLLHUP|unix.POLLNVAL|unix.POLLERR) != 0 {
			break
		}
	}
	_ = unix.Kill(-pid, unix.SIGHUP)
	time.Sleep(hangupGrace)
	fmt.Fprintln(os.Stderr, "mosaic init: the session's terminal hung up and the command did not end: killing it")
	if os.Getpid() == 1 { // bwrap's PID namespace; in --sandbox landlock systemd kills the unit's cgroup when the init exits
		_ = unix.Kill(-1, unix.SIGKILL)
	}
	_ = unix.Kill(pid, unix.SIGKILL)
}

// closeRangeCloexec is CLOSE_RANGE_CLOEXEC (linux/close_range.h): mark,
// not close.
const closeRangeCloexec = 1 << 2

// closeInherited marks every inherited descriptor above stderr close-on-exec:
// the command gets stdin, stdout and stderr and nothing else of the layers
// above it (bwrap's --info-fd, a descriptor systemd or a caller leaked).
// One close_range(2) does it (Linux 5.11); before that, or where a filter
// refuses it, each descriptor listed in /proc/self/fd.
func closeInherited() {
	if unix.CloseRange(3, math.MaxUint32, closeRangeCloexec) == nil {
		return
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// supervise forwards signals to pid and reaps children until pid exits.
// A command stopped by SIGTSTP (Ctrl-Z) is resumed at once: the session has
// no shell to resume it, so a program without a handler of its own would
// otherwise hang its session. Its own handler has run by then. group says
// the command leads its own process group (the PTY's foreground group).
// killAfter, when set, kills a command still running that long after the
// first SIGTERM (killCommand): one that ignores a stop (an interactive
// shell) still ends in time for the init to save its home.
func supervise(pid int, group bool, killAfter time.Duration, sigs chan os.Signal) int {
	armed := false
	for sig := range sigs {
		if sig != unix.SIGCHLD {
			_ = unix.Kill(pid, sig.(unix.Signal))
			if sig == unix.SIGTERM && killAfter > 0 && !armed {
				armed = true
				time.AfterFunc(killAfter, func() { killCommand(pid, group) })
			}
			continue
		}
		for {
			var ws unix.WaitStatus
			got, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WUNTRACED, nil)
			if got <= 0 || err != nil {
				break
			}
			if got == pid && ws.Stopped() {
				if ws.StopSignal() == unix.SIGTSTP {
					target := pid
					if group {
						target = -pid
					}
					_ = unix.Kill(target, unix.SIGCONT)
				}
				continue
			}
			if got == pid {
				return ExitCode(ws)
			}
		}
	}
	return sandbox.ExitSandboxRefused // unreachable: sigs is never closed
}

// ExitCode maps a wait status to a shell-style exit code: the status, or
// 128+n for a death by signal n.
func ExitCode(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// lookPath resolves name against the command's own PATH, not the init's.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := sandbox.DefaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + name
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found in the session's PATH (%s)", name, path)
}

func notifyFD() int {
	v := os.Getenv(sandbox.NotifyFDEnv)
	os.Unsetenv(sandbox.NotifyFDEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return -1
	}
	unix.CloseOnExec(fd)
	return fd
}

func notifyStatus(fd int, msg string) {
	if fd >= 0 {
		_, _ = unix.Write(fd, []byte(msg))
	}
}

// notifyBarrierTimeout bounds the wait for systemd in notifyBarrier: a manager
// that never answers delays the init's supervision of the command (its
// signals wait in a buffer), never the command itself.
const notifyBarrierTimeout = 5 * time.Second

// notifyBarrier returns once systemd has processed every message sent on fd
// before it, or after timeout. It is sd_notify's BARRIER=1: the message
// carries the write end of a pipe, and systemd closes that descriptor when it
// handles the message, so the read end hangs up. Without it, READY=1 from an
// init whose command exits at once can be dropped: systemd looks the sender
// up only when it reads the message, and ignores one that is gone by then
// (257: "Notify sender died before message is processed", 252: "Cannot find
// unit for notify message"), so the start job failed for a command that ran.
func notifyBarrier(fd int, timeout time.Duration) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return
	}
	defer unix.Close(p[0])
	err := unix.Sendmsg(fd, []byte("BARRIER=1"), unix.UnixRights(p[1]), nil, 0)
	unix.Close(p[1])
	if err != nil {
		return
	}
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		// No events asked for: POLLHUP is always reported.
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(p[0])}}, int(left.Milliseconds())+1)
		if err != unix.EINTR {
			return
		}
	}
}

// killCommand kills the command pid and what it started: every other
// process of the PID namespace when the init is its PID 1 (bwrap's), else
// (--sandbox landlock, where systemd kills the unit's cgroup when the init
// exits) the command and, leading one, its process group.
func killCommand(pid int, group bool) {
	fmt.Fprintf(os.Stderr, "mosaic init: the command did not end after SIGTERM: killing it, to save the home in time\n")
	if os.Getpid() == 1 {
		_ = unix.Kill(-1, unix.SIGKILL)
	}
	if group {
		_ = unix.Kill(-pid, unix.SIGKILL)
	}
	_ = unix.Kill(pid, unix.SIGKILL)
}

// Undumpable makes the calling process (the init) non-dumpable: the command,
// although it runs as the same user, can then neither read /proc/1/environ
// or /proc/1/mem (or anything else of /proc/1 that needs ptrace access) nor
// ptrace the init. The init's initial environment holds the promise (host
// namespace ids, the home's inode) and the credentials' values. The flag
// lasts until an execve, which the init never does; its children start
// dumpable again.
func Undumpable() error {
	if weakened {
		return nil
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("cannot make the init non-dumpable: %w", err)
	}
	return nil
}
