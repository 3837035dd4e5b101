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

	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/units/errcode"
	"mosaic/units/termsafe"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"mosaic/manager"
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
		&cli.StringSliceFlag{Name: "allow-host", Usage: "with --network allow, also let the session reach `HOST[:PORT]` (port 443 unless given; repeatable)"},
		&cli.StringFlag{Name: "sandbox", Usage: "the inner layer, `MODE`: bwrap (namespaces of its own) or landlock (for hosts where bwrap cannot run: less confined, see mosaic doctor) (default: the profile's, else bwrap)"},
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
		AllowHosts:  c.StringSlice("allow-host"),
		SetEnv:      c.StringSlice("env"),
		PassEnv:     c.StringSlice("pass-env"),
		CAFile:      c.String("ca-file"),
		SignIn:      c.Bool("sign-in"),

		AllowWriteHostExec: c.Bool("allow-write-host-exec"),
		NoGitIdentity:      c.Bool("no-git-identity"),
		Base:               c.String("base"),
	}
	if c.IsSet("clone") {
		req.Mode = request.ModeDirect
		if c.Bool("clone") {
			req.Mode = request.ModeClone
		}
	}
	if c.IsSet("name") && req.Name == "" {
		return req, errcode.BadName.New("--name is empty: give a name or leave the flag out")
	}
	var err error
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
		&cli.StringFlag{Name: "tmp-size", Usage: "bound the session's own /tmp (a tmpfs, in memory) to `SIZE`, e.g. 4G (default 1G; infinity: half the RAM)"},
	}
}

func limitsFrom(c *cli.Context) units.LimitStrings {
	return units.LimitStrings{MemoryMax: c.String("memory-max"), TasksMax: c.String("tasks-max"),
		CPUQuota: c.String("cpu-quota"), RuntimeMax: c.String("runtime-max"), TmpSize: c.String("tmp-size")}
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
		Name:         "start",
		Usage:        "start a confined session in the background",
		ArgsUsage:    "-- COMMAND [ARG...]",
		Flags:        sessionFlags(),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			req, err := requestFrom(c)
			if err != nil {
				return err
			}
			// Ctrl-C while the session starts cancels it: what was started is
			// stopped, and mosaic says so (exit 130), instead of dying while
			// the session starts anyway.
			ctx, stop := signal.NotifyContext(traced(context.Background()), unix.SIGINT, unix.SIGTERM, unix.SIGHUP)
			defer stop()
			conn, plan, err := manager.Open(ctx, req)
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
			if out.json { // the text result below says them
				out.notes(spec.Notes)
			}
			prog := newProgress(out.stderr, !out.json && isTerminal(os.Stderr) && plan.Spec.Clone != nil, "mosaic start "+plan.Spec.Name)
			prog.set("making the session's copy of " + termsafe.Escape(plan.Spec.Workspace, false) + " (clone mode)")
			s, err := m.Start(ctx, plan)
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
				fmt.Fprintf(w, "  output: mosaic logs %s   or   journalctl --user -t mosaic-%s\n", s.Name, s.Name)
				fmt.Fprintf(w, "  stop:   mosaic stop %s\n", s.Name)
				for _, n := range spec.Notes {
					fmt.Fprintf(w, "  note:   %s\n", n)
				}
			})
			return nil
		},
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
		Action: func(c *cli.Context) error {
			req, err := requestFrom(c)
			if err != nil {
				return err
			}
			req.Scope = c.Bool("scope")
			req.TTY = isTerminal(os.Stdin) && isTerminal(os.Stdout) && !req.Scope
			if c.IsSet("pty") {
				req.TTY = c.Bool("pty")
			}
			ctx := traced(context.Background())
			conn, plan, err := manager.Open(ctx, req)
			if err != nil {
				return err
			}
			defer conn.Close()
			spec := plan.Spec
			warnUnconfined(out, spec)
			if !c.Bool("quiet") && isTerminal(os.Stderr) && (req.TTY || isTerminal(os.Stdin)) {
				// As systemd-run --pty says where it runs: a sign that the
				// shell the user now types into is confined.
				fmt.Fprintf(os.Stderr, "mosaic: session %s: workspace %s, network %s; exit the command to leave\n",
					spec.Name, termsafe.Escape(spec.Workspace, false), spec.Network)
			}
			out.notes(spec.Notes)
			stdio := [3]*os.File{os.Stdin, os.Stdout, os.Stderr}
			var term *terminal
			if req.TTY {
				if term, err = openTerminal(os.Stdin, os.Stdout); err != nil {
					return errcode.PTY.New("cannot give the session a pseudo-terminal: %v (run with --pty=false)", err)
				}
				defer term.restore()
				stdio = [3]*os.File{term.slave, term.slave, term.slave}
				ctx = manager.WithStarted(ctx, term.started)
			}
			var held []heldTerminal
			if term == nil { // the session gets the user's own terminal, if any
				held = holdTerminals(stdio[:]...)
				defer restoreTerminals(held)
			}
			forward := []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP}
			if req.Scope {
				forward = append(forward, unix.SIGQUIT)
			}
			sigs := make(chan os.Signal, 4)
			signal.Notify(sigs, forward...)
			defer signal.Stop(sigs)
			if req.Scope && term == nil {
				defer forwardWinch(sigs)()
			}
			var s manager.Session
			if req.Scope {
				s, err = conn.RunScope(ctx, plan, stdio, sigs)
			} else {
				var m *manager.Manager
				if m, err = conn.Manager(ctx); err == nil { // a service's: there once Open returns
					s, err = m.Run(ctx, plan, [3]int{int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd())}, sigs)
				}
			}
			if term != nil {
				term.finish()
			}
			restoreTerminals(held)
			if req.Scope && errors.Is(err, errcode.Interrupted.Target()) {
				return interrupted(out, err.Error()) // Ctrl-C before the command ran: 130, as a shell would
			}
			if err != nil {
				return err
			}
			if spec.Clone != nil { // a service: its manager is there (clone mode is never a scope)
				if m, err := conn.Manager(ctx); err == nil {
					finishAfter(ctx, out, m, spec.Name)
				}
			}
			reportRun(out, s, spec.Workspace)
			return nil
		},
	}
}

// reportRun says how a run ended, on stderr (stdout is the command's): what
// it moved aside, and the session (--json) or why it was stopped; mosaic
// exits with the command's code.
func reportRun(out *output, s manager.Session, workspace string) {
	out.code = s.ExitCode()
	for _, m := range s.MovedAside {
		line := records.MovedAsideLine(workspace, m)
		if onTerminal(out.stderr) {
			line = termsafe.Escape(line, false)
		}
		fmt.Fprintln(out.stderr, "mosaic: "+line)
	}
	if out.json {
		enc := json.NewEncoder(out.stderr)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s)
	} else if why := stoppedReason(s); why != "" {
		fmt.Fprintln(out.stderr, why)
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
		Usage:     "stop a session: SIGTERM to all its processes, SIGKILL after --timeout",
		ArgsUsage: "NAME",
		Description: "The session's own stop timeout (start --stop-timeout, default 10s) also applies:\n" +
			"systemd sends SIGKILL when the shorter of the two has passed.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "timeout", Usage: "`DURATION` between SIGTERM and SIGKILL (0: at once)", Value: units.DefaultStopTimeout.String()},
			jsonFlag,
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			name, err := oneName(c)
			if err != nil {
				return err
			}
			timeout, err := units.ParseTimeout("timeout", c.String("timeout"))
			if err != nil {
				return err
			}
			return connected(func(ctx context.Context, m *manager.Manager) error {
				before, err := m.Status(ctx, name)
				if err != nil {
					return err
				}
				wasRunning := before.Running()
				prog := newProgress(out.stderr, !out.json && isTerminal(os.Stderr), "stopping "+name)
				s, err := m.Stop(ctx, name, timeout, prog.set)
				prog.done()
				if err != nil {
					return err
				}
				if wasRunning && s.Clone != nil {
					finishAfter(ctx, out, m, name)
				}
				out.result(s, func(w io.Writer) {
					how := s.How()
					if how == "" {
						how = s.State
					}
					if !wasRunning {
						fmt.Fprintf(w, "session %s had already ended (%s): nothing to stop\n", s.Name, how)
						return
					}
					fmt.Fprintf(w, "stopped session %s (%s)\n", s.Name, how)
					for _, m := range s.MovedAside {
						fmt.Fprintln(w, out.safe(records.MovedAsideLine(s.Workspace, m)))
					}
				})
				return nil
			})
		},
	}
}

// traced turns on MOSAIC_TRACE=1's step timings on stderr.
func traced(ctx context.Context) context.Context {
	if os.Getenv("MOSAIC_TRACE") == "1" {
		return manager.WithTrace(ctx, os.Stderr)
	}
	return ctx
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
