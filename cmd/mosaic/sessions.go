package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"mosaic/manager"
	"mosaic/units"
)

var jsonFlag = &cli.BoolFlag{Name: "json", Usage: "print one JSON document (errors as {\"error\": {\"code\", \"message\"}})"}

// sessionFlags are the flags that describe a session, shared by start and run.
func sessionFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "name", Usage: "session name: 1-63 of a-z 0-9 -, unit mosaic-NAME.service (default: from the command)"},
		&cli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Usage: "the directory the session may change (default: the current directory)"},
		&cli.StringSliceFlag{Name: "ro", Usage: "also show `PATH` read-only (repeatable)"},
		&cli.StringSliceFlag{Name: "rw", Usage: "also show `PATH` read-write (repeatable)"},
		&cli.StringFlag{Name: "memory-max", Usage: "memory limit, e.g. 4G (systemd MemoryMax=)"},
		&cli.StringFlag{Name: "tasks-max", Usage: "limit on processes and threads (TasksMax=)"},
		&cli.StringFlag{Name: "cpu-quota", Usage: "CPU time as a percentage of one CPU, e.g. 200% (CPUQuota=)"},
		&cli.StringFlag{Name: "runtime-max", Usage: "stop the session after this long, e.g. 2h (RuntimeMaxSec=)"},
		&cli.StringFlag{Name: "profile", Usage: "the agent harness: claude-code, codex, pi, opencode, generic, or one of yours (default: from the command's name)"},
		&cli.StringSliceFlag{Name: "credential", Usage: "pass `VAR` from this environment to the session, through a 0600 file systemd reads (repeatable)"},
		&cli.StringSliceFlag{Name: "env-file", Usage: "pass every NAME=VALUE of `FILE` (yours, mode 0600 or 0400) to the session (repeatable)"},
		&cli.StringFlag{Name: "stop-timeout", Usage: "time between SIGTERM and SIGKILL when the session is stopped", Value: units.DefaultStopTimeout.String()},
		jsonFlag,
	}
}

// requestFrom reads a session request from the flags and arguments.
func requestFrom(c *cli.Context) (manager.Request, error) {
	req := manager.Request{
		Name:        c.String("name"),
		Workspace:   c.String("workspace"),
		ExtraRO:     c.StringSlice("ro"),
		ExtraRW:     c.StringSlice("rw"),
		Command:     c.Args().Slice(),
		Env:         callerEnv(os.Environ()),
		Profile:     c.String("profile"),
		Credentials: c.StringSlice("credential"),
		EnvFiles:    c.StringSlice("env-file"),
	}
	if c.IsSet("name") && req.Name == "" {
		return req, units.BadInput("bad-name", "--name is empty: give a name or leave the flag out")
	}
	var err error
	if v := c.String("memory-max"); v != "" {
		if req.Limits.MemoryMax, err = units.ParseSize("memory-max", v); err != nil {
			return req, err
		}
	}
	if v := c.String("tasks-max"); v != "" {
		if req.Limits.TasksMax, err = units.ParseCount("tasks-max", v); err != nil {
			return req, err
		}
	}
	if v := c.String("cpu-quota"); v != "" {
		if req.Limits.CPUQuota, err = units.ParsePercent("cpu-quota", v); err != nil {
			return req, err
		}
	}
	if v := c.String("runtime-max"); v != "" {
		if req.Limits.RuntimeMax, err = units.ParseDuration("runtime-max", v); err != nil {
			return req, err
		}
	}
	if req.StopTimeout, err = units.ParseDuration("stop-timeout", c.String("stop-timeout")); err != nil {
		return req, err
	}
	return req, nil
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
			ctx := traced(context.Background())
			m, spec, secrets, err := manager.Launch(ctx, req)
			if err != nil {
				return err
			}
			defer m.Close()
			s, err := m.Start(ctx, spec, secrets)
			if err != nil {
				return err
			}
			out.result(s, func(w io.Writer) {
				fmt.Fprintf(w, "started session %s (main pid %d)\n", s.Name, s.MainPID)
				fmt.Fprintf(w, "  status: mosaic status %s   or   systemctl --user status %s\n", s.Name, s.Unit)
				fmt.Fprintf(w, "  output: mosaic logs %s   or   journalctl --user -t mosaic-%s\n", s.Name, s.Name)
				fmt.Fprintf(w, "  stop:   mosaic stop %s\n", s.Name)
			})
			return nil
		},
	}
}

func runCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "run a confined session in the foreground with this terminal's stdin, stdout and stderr; exit with its exit code",
		Description: "Like systemd-run --user --wait --pipe. Ctrl-C (SIGINT), SIGTERM and SIGHUP stop the session.\n" +
			"Without --name the session's home is removed when it ends; with --name it is kept for the next run.",
		ArgsUsage:    "-- COMMAND [ARG...]",
		Flags:        sessionFlags(),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			req, err := requestFrom(c)
			if err != nil {
				return err
			}
			ctx := traced(context.Background())
			m, spec, secrets, err := manager.Launch(ctx, req)
			if err != nil {
				return err
			}
			defer m.Close()
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP)
			defer signal.Stop(sigs)
			s, err := m.Run(ctx, spec, secrets, [3]int{0, 1, 2}, sigs)
			if err != nil {
				return err
			}
			out.code = s.ExitCode()
			if out.json {
				out.result(s, nil)
			}
			return nil
		},
	}
}

func stopCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:      "stop",
		Usage:     "stop a session: SIGTERM to all its processes, SIGKILL after --timeout",
		ArgsUsage: "NAME",
		Description: "The session's own stop timeout (start --stop-timeout, default 10s) also applies:\n" +
			"systemd sends SIGKILL when the shorter of the two has passed.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "timeout", Usage: "time between SIGTERM and SIGKILL", Value: units.DefaultStopTimeout.String()},
			jsonFlag,
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			name, err := oneName(c)
			if err != nil {
				return err
			}
			timeout, err := units.ParseDuration("timeout", c.String("timeout"))
			if err != nil {
				return err
			}
			return connected(func(ctx context.Context, m *manager.Manager) error {
				prog := newProgress(out.stderr, !out.json && isTerminal(os.Stderr), "stopping "+name)
				s, err := m.Stop(ctx, name, timeout, prog.set)
				prog.done()
				if err != nil {
					return err
				}
				out.result(s, func(w io.Writer) {
					how := s.How()
					if how == "" {
						how = s.State
					}
					fmt.Fprintf(w, "stopped session %s (%s)\n", s.Name, how)
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
		return "", units.BadInput("usage", "mosaic %s takes exactly one session NAME: see `mosaic list`", c.Command.Name)
	}
	name := c.Args().First()
	return name, units.ValidateName(name)
}

// progress prints what a slow operation is waiting for, on a terminal, once it
// has taken more than a second.
type progress struct {
	w       io.Writer
	enabled bool
	label   string
	msgs    chan string
	stopped chan struct{}
}

func newProgress(w io.Writer, enabled bool, label string) *progress {
	p := &progress{w: w, enabled: enabled, label: label, msgs: make(chan string, 8), stopped: make(chan struct{})}
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
				fmt.Fprintln(p.w)
			}
			return
		}
		if time.Since(start) > time.Second && last != "" {
			fmt.Fprintf(p.w, "\r\033[K%s: %s (%ds)", p.label, last, int(time.Since(start).Seconds()))
			shown = true
		}
	}
}

func (p *progress) done() {
	if p.enabled {
		p.stopped <- struct{}{}
	}
}
