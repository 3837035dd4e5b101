package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"mosaic/internal/errcode"
	"mosaic/internal/termsafe"
	"mosaic/manager/request"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"mosaic/manager"
	"mosaic/sandbox"
	"mosaic/units"
)

var fullFlag = &cli.BoolFlag{Name: "full", Aliases: []string{"l"}, Usage: "do not cut lines to the terminal's width"}

var jsonFlag = &cli.BoolFlag{Name: "json", Usage: "print one JSON document (errors as {\"error\": {\"code\", \"message\"}})"}

// sessionFlags are the flags that describe a session, shared by start and run.
func sessionFlags() []cli.Flag {
	return append(append(append([]cli.Flag{
		&cli.StringFlag{Name: "name", Usage: "session `NAME`: 1-63 of a-z 0-9 -, unit mosaic-NAME.service (default: from the command)"},
		&cli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Usage: "the `DIR` the session may change (default: the current directory)"},
		&cli.StringSliceFlag{Name: "ro", Usage: "also show `PATH` read-only (repeatable)"},
		&cli.StringSliceFlag{Name: "rw", Usage: "also show `PATH` read-write (repeatable)"},
	}, limitFlags()...),
		&cli.StringFlag{Name: "profile", Usage: "the agent `PROFILE`: claude-code, codex, pi, opencode, generic, or one of yours (default: from the command's name)"},
		&cli.StringSliceFlag{Name: "credential", Usage: "pass `VAR` from this environment to the session, through a 0600 file systemd reads (repeatable)"},
		&cli.StringSliceFlag{Name: "env-file", Usage: "pass every NAME=VALUE of `FILE` (yours, mode 0600 or 0400) to the session (repeatable)"},
		&cli.StringFlag{Name: "stop-timeout", Usage: "`DURATION` between SIGTERM and SIGKILL when the session is stopped", Value: units.DefaultStopTimeout.String()},
		&cli.StringFlag{Name: "network", Usage: "`MODE`: none (loopback only), allow (only to --allow-host names, through an egress proxy) or host (not confined) (default: the profile's; generic: none)"},
		&cli.StringSliceFlag{Name: "allow-host", Usage: "with --network allow, also let the session reach `HOST[:PORT]` (port 443 unless given; @GROUP for a group, a package group read only but as @GROUP:write; repeatable)"},
		&cli.BoolFlag{Name: "ask", Usage: "with --network allow, hold a connection to a host not on the list for 30 s while you answer (mosaic allow, mosaic deny, or mosaic approve), instead of refusing it at once"},
		&cli.StringFlag{Name: "sandbox", Usage: "the inner layer, `MODE`: bwrap (namespaces of its own) or landlock (for hosts where bwrap cannot run: less confined, see mosaic doctor) (default: the profile's, else bwrap)"},
		&cli.StringSliceFlag{Name: "publish", Aliases: []string{"p"}, Usage: "make the session's port reachable from the host, as docker run -p: `[ADDR:]HOSTPORT[:PORT]` (ADDR default 127.0.0.1; repeatable)"},
		&cli.StringSliceFlag{Name: "lend-ssh-key", Usage: "lend the session your ssh agent's `KEY=HOST` (a SHA256: fingerprint or a .pub file; HOST,HOST... for several) to log in to those hosts only (known_hosts' keys; repeatable)"},
		&cli.StringSliceFlag{Name: "lend-ssh-sign", Usage: "lend the session your ssh agent's `KEY` only to sign (git commit -S, set up in its ~/.gitconfig), never to log in"},
		&cli.StringSliceFlag{Name: "lend-git", Usage: "lend the session your git credential helper's token for `URL[=OPS]`, https://HOST/OWNER/REPO, for OPS of fetch, push, force, pr (default fetch,push); the egress proxy puts it in, the session holds a placeholder (repeatable)"},
		&cli.BoolFlag{Name: "may-launch", Usage: "the session may ask the mosaic bus to launch sessions, under its policy (mosaic bus launch inside)"},
		&cli.BoolFlag{Name: "no-git-identity", Usage: "give the session no ~/.gitconfig with your user.name, user.email and harmless git settings"},
		&cli.BoolFlag{Name: "allow-write-host-exec", Usage: "let the session change the workspace's files your tools run (.git/config, .git/hooks, .vscode, .envrc, ...), read-only by default"},
		jsonFlag,
	), append(agentFlags(), cloneFlags()...)...)
}

// requestFrom reads a session request from the flags and arguments.
func requestFrom(c *cli.Context) (request.Request, error) {
	req := request.Request{
		Name:        c.String("name"),
		Workspace:   c.String("workspace"),
		ExtraRO:     c.StringSlice("ro"),
		ExtraRW:     c.StringSlice("rw"),
		Command:     c.Args().Slice(),
		Env:         callerEnv(os.Environ()),
		Profile:     c.String("profile"),
		Credentials: c.StringSlice("credential"),
		EnvFiles:    c.StringSlice("env-file"),
		MayLaunch:   c.Bool("may-launch"),
		Network:     c.String("network"),
		Sandbox:     c.String("sandbox"),
		Publish:     c.StringSlice("publish"),
		LendSSHKey:  c.StringSlice("lend-ssh-key"),
		LendSSHSign: c.StringSlice("lend-ssh-sign"),
		LendGit:     c.StringSlice("lend-git"),
		AllowHosts:  c.StringSlice("allow-host"),
		Ask:         c.Bool("ask"),
		SetEnv:      c.StringSlice("env"),
		PassEnv:     c.StringSlice("pass-env"),
		CAFile:      c.String("ca-file"),
		SignIn:      c.Bool("sign-in"),

		AllowWriteHostExec: c.Bool("allow-write-host-exec"),
		NoGitIdentity:      c.Bool("no-git-identity"),
		Base:               c.String("base"),
	}
	if viaHost {
		req.NoAgent = "a profile cannot lend ssh keys through --host: the remote's mosaic would lend the agent ssh forwarded to it, which the remote's root can use too"
	}
	var err error
	if req.Mode, err = modeFrom(c); err != nil {
		return req, err
	}
	if c.IsSet("name") && req.Name == "" {
		return req, errcode.BadName.New("--name is empty: give a name or leave the flag out")
	}
	if req.Limits, err = limitsFrom(c).Parse(); err != nil {
		return req, err
	}
	if req.StopTimeout, err = units.ParseDuration("stop-timeout", c.String("stop-timeout")); err != nil {
		return req, err
	}
	return req, nil
}

// limitFlags are the resource limits a session can be given.
func limitFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "memory-max", Usage: "memory limit `SIZE`, e.g. 4G or 512M (MemoryMax=)"},
		&cli.StringFlag{Name: "tasks-max", Usage: "limit of `N` processes and threads (TasksMax=)"},
		&cli.StringFlag{Name: "cpu-quota", Usage: "CPU time as a `PERCENT` of one CPU, e.g. 200% (CPUQuota=)"},
		&cli.StringFlag{Name: "runtime-max", Usage: "stop the session after `DURATION`, e.g. 2h or 90 (seconds) (RuntimeMaxSec=)"},
		&cli.StringFlag{Name: "home-size", Usage: "bound the session's own home (a tmpfs, in memory; a kept home is loaded into it and saved back at the end) to `SIZE`, e.g. 4G (default 2G; infinity: half the RAM)"},
		&cli.StringFlag{Name: "tmp-size", Usage: "bound the session's own /tmp (a tmpfs, in memory) to `SIZE`, e.g. 4G (default 1G; infinity: half the RAM)"},
	}
}

func limitsFrom(c *cli.Context) units.LimitStrings {
	return units.LimitStrings{MemoryMax: c.String("memory-max"), TasksMax: c.String("tasks-max"),
		CPUQuota: c.String("cpu-quota"), RuntimeMax: c.String("runtime-max"), TmpSize: c.String("tmp-size"), HomeSize: c.String("home-size")}
}

// callerEnv picks the non-secret variables a session inherits from the
// caller's terminal: how to draw and which language to speak.
func callerEnv(environ []string) []string {
	var env []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "TERM", name == "COLORTERM", name == "NO_COLOR", name == "LANG", name == "LANGUAGE", name == "TZ",
			strings.HasPrefix(name, "LC_"):
			if !strings.ContainsAny(kv, "\n\x00") {
				env = append(env, kv)
			}
		}
	}
	return env
}

func startCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:      "start",
		Usage:     "start a confined session in the background",
		ArgsUsage: "-- COMMAND [ARG...]",
		Flags: append(sessionFlags(),
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print only the session's name (and errors), no notes: name=$(mosaic start -q -- CMD)"},
			&cli.BoolFlag{Name: "pty", Aliases: []string{"t"}, Usage: "give the session a terminal of its own that lives with it, to connect to with mosaic attach NAME (its output goes there, not to the journal)"},
		),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			req, err := requestFrom(c)
			if err != nil {
				return err
			}
			req.TTY = c.Bool("pty")
			// Ctrl-C while the session starts cancels it: what was started is
			// stopped, and mosaic says so (exit 130), instead of dying while
			// the session starts anyway.
			ctx, stop := signal.NotifyContext(traced(context.Background()), unix.SIGINT, unix.SIGTERM, unix.SIGHUP)
			defer stop()
			conn, plan, err := manager.Open(ctx, req, out.managerOptions(manager.Options{Say: sayOnStderr}))
			if ctx.Err() != nil {
				return interrupted(out, "interrupted: nothing was started")
			}
			if err != nil {
				return err
			}
			defer conn.Close()
			m, err := conn.Manager(ctx) // a service's: there once Open returns
			if err != nil {
				return err
			}
			spec := plan.Spec
			warnUnconfined(out, spec)
			quiet := c.Bool("quiet")
			if out.json && !quiet { // the text result below says them
				out.notes(spec.Notes)
			}
			start := m.Start
			if req.TTY { // the plan says so too (TTY): the init makes it the command's terminal
				term, release, err := givePTY(m)
				if err != nil {
					return err
				}
				defer release()
				start = func(ctx context.Context, plan manager.Plan) (manager.Session, error) {
					return m.StartPTY(ctx, plan, term)
				}
			}
			prog := newProgress(out.stderr, !out.json && isTerminal(os.Stderr) && spec.Clone != nil, "mosaic start "+spec.Name)
			prog.set("making the session's copy of " + termsafe.Escape(spec.Workspace, false) + " (clone mode)")
			s, err := start(ctx, plan)
			prog.done()
			if ctx.Err() != nil {
				if _, err := m.Stop(context.Background(), spec.Name, time.Second, nil); err != nil {
					return err
				}
				return interrupted(out, fmt.Sprintf("interrupted: session %s was stopped before it finished starting", spec.Name))
			}
			if err != nil {
				return err
			}
			out.result(s, func(w io.Writer) {
				if quiet {
					fmt.Fprintln(w, s.Name)
					return
				}
				printStarted(w, s, req.TTY, spec.Notes)
			})
			return nil
		},
	}
}

// printStarted is start's summary of session s: how to reach it, or, its
// command already gone, how it ended; an empty allowlist is said to allow
// nothing yet, with the command that grants (issue 40).
func printStarted(w io.Writer, s manager.Session, tty bool, notes []string) {
	if !s.Running() {
		// The command ran and is already gone: say how, not "started".
		how := s.How()
		if how == "" {
			how = s.State
		}
		fmt.Fprintf(w, "session %s started, and its command has already ended (%s)\n", s.Name, how)
		fmt.Fprintf(w, "  output: mosaic logs %s\n", s.Name)
		fmt.Fprintf(w, "  forget: mosaic rm %s\n", s.Name)
		return
	}
	if s.MainPID != 0 {
		fmt.Fprintf(w, "started session %s (main pid %d)\n", s.Name, s.MainPID)
	} else {
		fmt.Fprintf(w, "started session %s\n", s.Name)
	}
	fmt.Fprintf(w, "  status: mosaic status %s   or   systemctl --user status %s\n", s.Name, s.Unit)
	if tty {
		fmt.Fprintf(w, "  attach: mosaic attach %s   (detach: Ctrl-P Ctrl-Q)\n", s.Name)
	} else {
		fmt.Fprintf(w, "  output: mosaic logs %s   or   journalctl --user -t mosaic-%s\n", s.Name, s.Name)
	}
	fmt.Fprintf(w, "  stop:   mosaic stop %s\n", s.Name)
	if s.Network == sandbox.NetworkAllow && len(s.AllowHosts) == 0 {
		fmt.Fprintf(w, "  network: allows nothing yet (grant with mosaic allow %s HOST)\n", s.Name)
	}
	for _, n := range notes {
		fmt.Fprintf(w, "  note:   %s\n", n)
	}
}

func runCommand(out *output) *cli.Command {
	flags := append(sessionFlags(),
		&cli.BoolFlag{Name: "pty", Usage: "give the session a pseudo-terminal of its own, relayed to this one in raw mode (default: when stdin and stdout are terminals, without --scope)"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no banner on a terminal when the session starts"},
		&cli.BoolFlag{Name: "scope", Usage: "start the sandbox from mosaic, in a transient scope (mosaic-NAME.scope), with this terminal inherited directly: bwrap's sandbox alone, no unit sandbox"},
	)
	return &cli.Command{
		Name:  "run",
		Usage: "run a confined session in the foreground on this terminal; exit with its exit code",
		Description: "On a terminal the session gets a pseudo-terminal of its own (--pty): keys, colors and window size work\n" +
			"as in the terminal itself, and the terminal is restored at the end. Otherwise it is like\n" +
			"systemd-run --user --wait --pipe: SIGINT, SIGTERM and SIGHUP to mosaic stop the session.\n" +
			"With --scope, mosaic starts the sandbox itself and forwards SIGINT, SIGQUIT, SIGTERM, SIGHUP and\n" +
			"SIGWINCH to it. Without --name the session's home is removed when it ends; with --name it is kept.",
		ArgsUsage:    "-- COMMAND [ARG...]",
		Flags:        flags,
		OnUsageError: usageError,
		Action:       func(c *cli.Context) error { return runSession(c, out) },
	}
}

// runSession is mosaic run: the session started, its terminal or pipes
// relayed and the signals mosaic gets forwarded until it ends, then its
// change's finish step and its end reported.
func runSession(c *cli.Context, out *output) error {
	req, err := runRequest(c)
	if err != nil {
		return err
	}
	ctx := traced(context.Background())
	conn, plan, err := manager.Open(ctx, req, out.managerOptions(manager.Options{TieSelf: true, Say: sayOnStderr})) // one run, then mosaic exits
	if err != nil {
		return err
	}
	defer conn.Close()
	spec := plan.Spec
	warnUnconfined(out, spec)
	announceRun(out, spec, c.Bool("quiet"))
	stdin, closeStdin, err := runStdin(req)
	if err != nil {
		return err
	}
	defer closeStdin()
	stdio := [3]*os.File{stdin, os.Stdout, os.Stderr}
	var term *terminal
	if req.TTY {
		if term, err = openTerminal(os.Stdin, os.Stdout); err != nil {
			return errcode.PTY.New("cannot give the session a pseudo-terminal: %w (run with --pty=false)", err)
		}
		defer term.restore()
		stdio = [3]*os.File{term.slave, term.slave, term.slave}
		ctx = manager.WithStarted(ctx, term.started)
	}
	var held []heldTerminal
	drain := func() {}
	if term == nil { // the session gets the user's own terminal, if any
		held = holdTerminals(stdio[:]...)
		defer restoreTerminals(held)
		if drain, err = filterTerminalOutput(&stdio); err != nil {
			return errcode.PTY.New("cannot give the session a pipe to filter its output by: %w", err)
		}
	}
	sigs, stopSignals := runSignals(req.Scope, term == nil)
	defer stopSignals()
	s, first, err := runPlan(ctx, conn, plan, stdio, sigs)
	if term != nil {
		term.finish()
	}
	drain()
	restoreTerminals(held)
	if req.Scope && errors.Is(err, errcode.Interrupted.Target()) {
		return interrupted(out, err.Error()) // Ctrl-C before the command ran: 130, as a shell would
	}
	if err != nil {
		return err
	}
	if spec.Clone != nil { // the finish step is a service of its own, for a scope's session too
		if m, err := conn.Manager(ctx); err == nil {
			finishAfter(ctx, out, m, spec.Name, !spec.NameGiven)
		}
	}
	reportRun(out, s)
	if interruptedRun(s, first) {
		out.dieOf = unix.SIGINT
	}
	return nil
}

// runRequest is run's request from its flags: --scope, and whether the
// session gets a pseudo-terminal of its own.
func runRequest(c *cli.Context) (request.Request, error) {
	req, err := requestFrom(c)
	if err != nil {
		return req, err
	}
	req.Scope = c.Bool("scope")
	// A run in the background of its shell (`mosaic run -- cmd &`,
	// `timeout 20 mosaic run ...`) pipes, as systemd-run --pipe
	// does: a pseudo-terminal would need the terminal's modes set,
	// which stops a background job (SIGTTOU).
	req.TTY = isTerminal(os.Stdin) && isTerminal(os.Stdout) && foreground(os.Stdin) && !req.Scope
	if c.IsSet("pty") {
		req.TTY = c.Bool("pty")
	}
	return req, nil
}

// runSignals catches the signals a run forwards to its session (SIGQUIT
// too for a scope, and SIGWINCH for a scope on the user's own terminal);
// stop lets them go.
func runSignals(scope, ownTerminal bool) (sigs chan os.Signal, stop func()) {
	forward := []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP}
	if scope {
		forward = append(forward, unix.SIGQUIT)
	}
	sigs = make(chan os.Signal, 4)
	signal.Notify(sigs, forward...)
	stopWinch := func() {}
	if scope && ownTerminal {
		stopWinch = forwardWinch(sigs)
	}
	return sigs, func() {
		stopWinch()
		signal.Stop(sigs)
	}
}

// runPlan runs a planned session on stdio, as a scope (whose init gets
// each signal of sigs itself) or a service (whose run stops it on one; the
// returned tee says which came first; nil for a scope).
func runPlan(ctx context.Context, conn *manager.Connecting, plan manager.Plan, stdio [3]*os.File, sigs chan os.Signal) (manager.Session, *signalTee, error) {
	if plan.Spec.Scope {
		s, err := conn.RunScope(ctx, plan, stdio, sigs)
		return s, nil, err
	}
	m, err := conn.Manager(ctx) // a service's: there once Open returns
	if err != nil {
		return manager.Session{}, nil, err
	}
	first := firstSignal(sigs)
	s, err := m.Run(ctx, plan, [3]int{int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd())}, first.relay)
	return s, first, err
}

// announceRun says on stderr where a run runs, on a terminal in the
// foreground only and when the user types into the session (stdin a
// terminal, not a forced --pty fed from a pipe or /dev/null): as
// systemd-run --pty does, a sign that the shell the user now types into is
// confined. Then the notes; quiet drops both, --json the first.
func announceRun(out *output, spec units.Spec, quiet bool) {
	if quiet {
		return
	}
	if !out.json && isTerminal(os.Stderr) && foreground(os.Stderr) && isTerminal(os.Stdin) {
		fmt.Fprintf(os.Stderr, "mosaic: session %s: workspace %s, network %s; exit the command to leave\n",
			spec.Name, termsafe.Escape(spec.Workspace, false), spec.Network)
	}
	out.notes(spec.Notes)
}

// interruptedRun reports whether Ctrl-C ended a run: it reached the command
// (a key on the session's own terminal, or forwarded to a scope), or, piped,
// its SIGINT had mosaic stop the session (first: the run's signals). mosaic
// then dies of SIGINT as the command would have, so that the shell puts its
// prompt on a new line, reports 130 and leaves a loop.
func interruptedRun(s manager.Session, first *signalTee) bool {
	return s.Signal == "SIGINT" || (first != nil && s.StoppedBy == "signal" && first.was(unix.SIGINT))
}

// runStdin is a piped run's stdin for its session: mosaic's own, but
// /dev/null for a run in the background of its terminal. A background job
// does not read its terminal (a shell stops one that tries, SIGTTIN), and
// systemd resets a terminal it gets as a unit's stdin: it flushes what the
// user typed at the shell's prompt meanwhile and sets the terminal's modes
// under the shell.
// The returned function closes what runStdin opened.
func runStdin(req request.Request) (*os.File, func(), error) {
	if req.TTY || req.Scope || !isTerminal(os.Stdin) || foreground(os.Stdin) {
		return os.Stdin, func() {}, nil
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, nil, err
	}
	return null, func() { null.Close() }, nil
}

// A signalTee passes the signals mosaic run gets on to the session and
// remembers the first: a Ctrl-C that stopped a piped session makes mosaic
// exit as one, whatever the command did with the SIGTERM of the stop.
type signalTee struct {
	relay chan os.Signal
	first chan os.Signal // holds the first signal, once one came
}

// firstSignal tees sigs.
func firstSignal(sigs <-chan os.Signal) *signalTee {
	t := &signalTee{relay: make(chan os.Signal, cap(sigs)), first: make(chan os.Signal, 1)}
	go func() {
		for sig := range sigs {
			select {
			case t.first <- sig:
			default:
			}
			t.relay <- sig
		}
	}()
	return t
}

// was reports whether the first signal was sig.
func (t *signalTee) was(sig os.Signal) bool {
	select {
	case s := <-t.first:
		t.first <- s
		return s == sig
	default:
		return false
	}
}

// reportRun says how a run ended, on stderr (stdout is the command's): the
// session (--json) or why it was stopped; mosaic exits with the command's
// code.
func reportRun(out *output, s manager.Session) {
	out.code = s.ExitCode()
	if s.Home != nil && (s.Home.State == sandbox.HomeRunning || s.Home.State == sandbox.HomeInSave) { // its init could not say it
		fmt.Fprintln(out.stderr, "mosaic: session "+s.Name+"'s home: "+s.HomeLine())
	}
	if out.json {
		enc := json.NewEncoder(out.stderr)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s)
	} else {
		if why := stoppedReason(s); why != "" {
			fmt.Fprintln(out.stderr, why)
		}
		printRefusals(out.stderr, s, out.safe)
	}
}

// forwardWinch has SIGWINCH forwarded on sigs too, where a burst of them
// (a terminal window being resized) never takes the last place: os/signal
// drops a signal whose channel is full, and a Ctrl-C behind four SIGWINCH,
// come while mosaic waits on systemd and reads none, would be lost. A
// SIGWINCH says only "read the size again": the ones that find no room
// are told by those queued. It returns what stops it.
func forwardWinch(sigs chan os.Signal) (stop func()) {
	winch, done := make(chan os.Signal, 1), make(chan struct{})
	signal.Notify(winch, unix.SIGWINCH)
	go func() {
		for {
			select {
			case sig := <-winch:
				if len(sigs) < cap(sigs)-1 {
					select {
					case sigs <- sig:
					default:
					}
				}
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(winch); close(done) }
}

// interrupted reports a command cut short by Ctrl-C (or SIGTERM): one line
// (a JSON error with --json), exit 130 as a shell would.
func interrupted(out *output, msg string) error {
	out.fail(errcode.Interrupted.New("%s", msg))
	out.code = 130
	return nil
}

// warnUnconfined says in one line on stderr when a session is not
// confined in a way the user may have assumed it is.
func warnUnconfined(out *output, spec units.Spec) {
	if spec.Clone == nil {
		fmt.Fprintf(out.stderr, "mosaic: %s\n", request.DirectWarning)
	}
	if spec.Network == "host" {
		fmt.Fprintf(out.stderr, "mosaic: warning: session %s has network host: NOT CONFINED (it reaches your network, loopback services and abstract sockets)\n", spec.Name)
	}
}

// stoppedReason is the one line mosaic run prints when the session did not
// end by itself.
func stoppedReason(s manager.Session) string {
	how := s.How()
	switch s.StoppedBy {
	case "outside":
		return fmt.Sprintf("mosaic: session %s was stopped from outside (mosaic stop or systemctl --user stop): %s", s.Name, how)
	case "runtime-max":
		return fmt.Sprintf("mosaic: session %s reached its --runtime-max and was stopped: %s", s.Name, how)
	}
	return ""
}

func stopCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:      "stop",
		Usage:     "stop sessions: SIGTERM to all their processes, SIGKILL after --timeout",
		ArgsUsage: "NAME...",
		Description: "The session's own stop timeout (start --stop-timeout, default 10s) also applies:\n" +
			"systemd sends SIGKILL when the shorter of the two has passed. Several sessions are stopped in turn.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "timeout", Usage: "`DURATION` between SIGTERM and SIGKILL (0: at once)", Value: units.DefaultStopTimeout.String()},
			jsonFlag,
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			names, err := someNames(c)
			if err != nil {
				return err
			}
			timeout, err := units.ParseTimeout("timeout", c.String("timeout"))
			if err != nil {
				return err
			}
			return out.connected(func(ctx context.Context, m *manager.Manager) error {
				return eachName(out, names, func(name string) (any, func(io.Writer), error) {
					s, wasRunning, err := stopOne(ctx, m, out, name, timeout)
					if err != nil {
						return nil, nil, err
					}
					if wasRunning && s.Clone != nil {
						finishAfter(ctx, out, m, name, false)
					}
					return s, func(w io.Writer) {
						how := s.How()
						if how == "" {
							how = s.State
						}
						if !wasRunning {
							fmt.Fprintf(w, "session %s had already ended (%s): nothing to stop\n", s.Name, how)
							return
						}
						fmt.Fprintf(w, "stopped session %s (%s)\n", s.Name, how)
						if line := s.HomeLine(); line != "" {
							fmt.Fprintf(w, "its home: %s\n", out.safe(line))
						}
					}, nil
				})
			})
		},
	}
}

// stopOne stops one session, with a progress line on a terminal, and says
// whether it was running.
func stopOne(ctx context.Context, m *manager.Manager, out *output, name string, timeout time.Duration) (manager.Session, bool, error) {
	before, err := m.Status(ctx, name)
	if err != nil {
		return manager.Session{}, false, err
	}
	prog := newProgress(out.stderr, !out.json && isTerminal(os.Stderr), "stopping "+name)
	s, err := m.Stop(ctx, name, timeout, prog.set)
	prog.done()
	return s, before.Running(), err
}

// traced turns on MOSAIC_TRACE=1's step timings and D-Bus message count on
// stderr; MOSAIC_TRACE=dbus also names each message.
func traced(ctx context.Context) context.Context {
	if t := os.Getenv("MOSAIC_TRACE"); t == "1" || t == "dbus" {
		return manager.WithTrace(ctx, os.Stderr, t == "dbus")
	}
	return ctx
}

// someNames reads one or more NAME arguments, each checked before any is
// acted on (a typo among them changes nothing).
func someNames(c *cli.Context) ([]string, error) {
	if c.NArg() == 0 {
		return nil, errcode.Usage.New("mosaic %s takes one or more session NAMEs: see `mosaic list`", c.Command.Name)
	}
	names := c.Args().Slice()
	for _, n := range names {
		if err := units.ValidateName(n); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// eachName runs do for every name in turn, as systemctl and docker do with
// several: a failure is reported (one line, or its JSON error in the
// list) and the others still run; mosaic exits with the first failure's
// code. With one name, --json prints that name's document alone; with
// several, a list of them.
func eachName(out *output, names []string, do func(name string) (doc any, text func(io.Writer), err error)) error {
	if len(names) == 1 {
		doc, text, err := do(names[0])
		if err != nil {
			return err
		}
		out.result(doc, text)
		return nil
	}
	var docs []any
	code := 0
	for _, n := range names {
		doc, text, err := do(n)
		if err != nil {
			e := errcode.Of(err)
			if code == 0 {
				code = e.Exit
			}
			if out.json {
				docs = append(docs, map[string]any{"name": n, "error": map[string]string{"code": e.Code, "message": e.Message}})
			} else {
				out.fail(err)
			}
			continue
		}
		if out.json {
			docs = append(docs, doc)
		} else {
			text(out.stdout)
		}
	}
	if out.json {
		out.result(docs, nil)
	}
	out.code = code
	return nil
}

// oneName reads the single NAME argument.
func oneName(c *cli.Context) (string, error) {
	if c.NArg() != 1 {
		return "", errcode.Usage.New("mosaic %s takes exactly one session NAME: see `mosaic list`", c.Command.Name)
	}
	name := c.Args().First()
	return name, units.ValidateName(name)
}

// progress prints what a slow operation is waiting for, on a terminal, once it
// has taken more than a second.
type progress struct {
	w        io.Writer
	enabled  bool
	label    string
	msgs     chan string
	stopped  chan struct{}
	finished chan struct{}
}

func newProgress(w io.Writer, enabled bool, label string) *progress {
	p := &progress{w: w, enabled: enabled, label: label, msgs: make(chan string, 8), stopped: make(chan struct{}), finished: make(chan struct{})}
	if enabled {
		go p.loop()
	}
	return p
}

func (p *progress) set(msg string) {
	if p.enabled {
		select {
		case p.msgs <- msg:
		default:
		}
	}
}

func (p *progress) loop() {
	start := time.Now()
	last, shown := "", false
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case m := <-p.msgs:
			last = m
		case <-tick.C:
		case <-p.stopped:
			if shown {
				fmt.Fprint(p.w, "\r\033[K") // the result is printed on a clean line
			}
			close(p.finished)
			return
		}
		if time.Since(start) > time.Second && last != "" {
			fmt.Fprintf(p.w, "\r\033[K%s: %s (%ds)", p.label, last, int(time.Since(start).Seconds()))
			shown = true
		}
	}
}

// done stops the progress line and returns once it is cleared.
func (p *progress) done() {
	if p.enabled {
		p.stopped <- struct{}{}
		<-p.finished
	}
}
