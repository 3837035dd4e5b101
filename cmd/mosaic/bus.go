package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"mosaic/credentials"
	"mosaic/internal/errcode"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"mosaic/cmd/mosaic/internal/bus"
	"mosaic/manager"
	"mosaic/sandbox"
	"mosaic/units"
)

func busCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:  "bus",
		Usage: "the mosaic bus: serve it (mosaic-bus.service), or ask it to launch, stop, list or show sessions",
		Description: "A session started with --may-launch reaches the bus at $MOSAIC_BUS and may launch sessions under\n" +
			"the policy in ~/.config/mosaic/bus.conf; outside any session every verb is allowed.\n" +
			"Install the bus with contrib/install-bus-unit.sh.",
		Subcommands: []*cli.Command{busServeCommand(out), busPrepareCommand(out), busLaunchCommand(out), busStopCommand(out), busListCommand(out), busStatusCommand(out)},
	}
}

func busServeCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:         "serve",
		Usage:        "run the bus in the foreground (what mosaic-bus.service runs); READY=1 once it listens",
		Flags:        []cli.Flag{jsonFlag}, // an error that stops it as one JSON document
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			ctx, stop := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT)
			defer stop()
			paths, err := out.userPaths()
			if err != nil {
				return err
			}
			return bus.Serve(ctx, paths, func() { _, _ = daemon.SdNotify(false, daemon.SdNotifyReady) })
		},
	}
}

func busPrepareCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:         "prepare",
		Usage:        "what mosaic-bus.service runs unconfined before the bus: makes its directories, records the manager's namespaces",
		Hidden:       true,
		OnUsageError: usageError,
		Action: func(*cli.Context) error {
			paths, err := out.userPaths()
			if err != nil {
				return err
			}
			return bus.Prepare(paths)
		},
	}
}

func busLaunchCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:      "launch",
		Usage:     "ask the bus to start a session (from a --may-launch session: under the bus's policy)",
		ArgsUsage: "-- COMMAND [ARG...]",
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "name", Usage: "session `NAME` (default: from the command)"},
			&cli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Usage: "the session's workspace `DIR` (default: the current directory)"},
			&cli.StringFlag{Name: "profile", Usage: "the agent `PROFILE`; its credentials come from the bus's environment"},
			&cli.StringSliceFlag{Name: "ro", Usage: "also show `PATH` read-only (not from a session)"},
			&cli.StringSliceFlag{Name: "rw", Usage: "also show `PATH` read-write (not from a session)"},
			&cli.StringFlag{Name: "network", Usage: "`MODE`: none, allow or host (not from a session; default: the profile's)"},
			&cli.StringSliceFlag{Name: "allow-host", Usage: "with --network allow, also `HOST[:PORT]` (not from a session)"},
			&cli.StringFlag{Name: "stop-timeout", Usage: "`DURATION` between SIGTERM and SIGKILL when stopped"},
			&cli.BoolFlag{Name: "may-launch", Usage: "the launched session may launch others (not from a session)"},
			&cli.StringSliceFlag{Name: "lend-ssh-key", Usage: "refused: the bus lends no ssh `KEY=HOST` (use mosaic start)"},
			&cli.StringSliceFlag{Name: "lend-ssh-sign", Usage: "refused: the bus lends no ssh `KEY` (use mosaic start)"},
			&cli.StringSliceFlag{Name: "lend-git", Usage: "lend the session your git credential helper's token for `URL[=OPS]`, as mosaic start does (from a session: only a repository and operations it was lent itself)"},
		}, limitFlags()...), jsonFlag),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			ws := c.String("workspace")
			if ws == "" {
				ws = "."
			}
			ws, err := filepath.Abs(ws)
			if err != nil {
				return errcode.BadWorkspace.New("cannot tell the workspace's path: %w", err)
			}
			req := bus.Request{Verb: "launch", Name: c.String("name"), Workspace: ws, Profile: c.String("profile"),
				Command: c.Args().Slice(), RO: c.StringSlice("ro"), RW: c.StringSlice("rw"), Limits: limitsFrom(c),
				StopTimeout: c.String("stop-timeout"), MayLaunch: c.Bool("may-launch"),
				Network: c.String("network"), AllowHosts: c.StringSlice("allow-host"),
				LendSSHKey: c.StringSlice("lend-ssh-key"), LendSSHSign: c.StringSlice("lend-ssh-sign"),
				LendGit: c.StringSlice("lend-git"), BuildEnv: credentials.BuildEnvOf(os.LookupEnv)}
			var s manager.Session
			if err := askBus(out, req, &s); err != nil {
				return err
			}
			out.result(s, func(w io.Writer) {
				fmt.Fprintf(w, "launched session %s (main pid %d) through the bus\n", s.Name, s.MainPID)
			})
			out.notes(droppedNotes(s.EnvironmentDropped))
			return nil
		},
	}
}

// droppedNotes say which build settings a launch through the bus did not
// pass for their values, as mosaic start says it (never the value): the
// bus answers with the session's record, which names them, and a user
// whose GOPROXY held a token would otherwise learn it only from a build
// that fails inside.
func droppedNotes(names []string) []string {
	var notes []string
	for _, n := range names {
		notes = append(notes, fmt.Sprintf("%s of your environment was not passed, for its value: one that looks like it carries a credential (the bus passes none: mosaic start --credential %s) or that an environment file cannot hold", n, n))
	}
	return notes
}

func busStopCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:      "stop",
		Usage:     "ask the bus to stop a session (from a session: one it launched)",
		ArgsUsage: "NAME",
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
			var s manager.Session
			if err := askBus(out, bus.Request{Verb: "stop", Name: name, Timeout: c.String("timeout")}, &s); err != nil {
				return err
			}
			out.result(s, func(w io.Writer) { fmt.Fprintf(w, "stopped session %s (%s)\n", s.Name, s.How()) })
			return nil
		},
	}
}

func busListCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:         "list",
		Usage:        "ask the bus for the running sessions (from a session: the ones it launched)",
		Flags:        []cli.Flag{jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			list := []manager.Session{}
			if err := askBus(out, bus.Request{Verb: "list"}, &list); err != nil {
				return err
			}
			out.result(list, func(w io.Writer) { printList(w, list, true) })
			return nil
		},
	}
}

func busStatusCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:         "status",
		Usage:        "ask the bus about one session (from a session: one it launched)",
		ArgsUsage:    "NAME",
		Flags:        []cli.Flag{jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			name, err := oneName(c)
			if err != nil {
				return err
			}
			var s manager.Session
			if err := askBus(out, bus.Request{Verb: "status", Name: name}, &s); err != nil {
				return err
			}
			out.result(s, func(w io.Writer) { printStatus(w, s, out.safe) })
			return nil
		},
	}
}

// busSocket is where to reach the bus: $MOSAIC_BUS inside a session, else
// the user's socket in the runtime directory.
func busSocket(out *output) (string, error) {
	if p := os.Getenv(sandbox.BusEnv); p != "" {
		return p, nil
	}
	p, err := out.userPaths()
	if err != nil {
		return "", err
	}
	return p.BusSocket(), nil
}

// busAnswerTimeout bounds how long a bus client waits for its answer.
const busAnswerTimeout = 2 * time.Minute

// mayHaveHappened says, for a request the bus took and did not answer (it
// died, or was stopped, on the way), what may have been done and how to
// tell: the bus starts the session before it answers, and its death does
// not undo a start.
func mayHaveHappened(req bus.Request) string {
	check := "`mosaic bus list`"
	if req.Name != "" {
		check = "`mosaic bus status " + req.Name + "`"
	}
	switch req.Verb {
	case "launch":
		return ": the session may have been launched all the same; check with " + check + " (outside a session, `mosaic list`) before launching it again"
	case "stop":
		return ": the session may have been stopped all the same; check with " + check
	}
	return ""
}

// askBus sends one request and decodes the result into v.
func askBus(out *output, req bus.Request, v any) error {
	path, err := busSocket(out)
	if err != nil {
		return err
	}
	conn, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return errcode.NoBus.New("cannot reach the mosaic bus at %s (%w): install and start it with contrib/install-bus-unit.sh, or see `systemctl --user status mosaic-bus`", path, err)
	}
	defer conn.Close()
	// A bus that is stopped or wedged must not hang its client: the answer
	// is due within the longest the bus itself may wait on systemd (a start,
	// or a stop's SIGTERM grace and then SIGKILL), and a margin.
	wait := busAnswerTimeout
	if d, err := units.ParseDuration("timeout", req.Timeout); err == nil && req.Verb == "stop" {
		wait += d
	}
	conn.SetDeadline(time.Now().Add(wait))
	line, _ := json.Marshal(req)
	if _, err := conn.Write(append(line, '\n')); err != nil {
		return errcode.BusError.New("cannot send to the mosaic bus: %w", err)
	}
	answer, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		return errcode.BusError.New("the mosaic bus did not answer (%w)%s (see `journalctl --user -u mosaic-bus`)", err, mayHaveHappened(req))
	}
	var a bus.Answer
	if err := json.Unmarshal(answer, &a); err != nil {
		return errcode.BusError.New("the mosaic bus answered something that is not JSON: %w", err)
	}
	if !a.OK {
		if a.Error == nil {
			return errcode.BusError.New("the mosaic bus refused without saying why")
		}
		exit := a.Error.Exit
		if exit == 0 {
			exit = errcode.ExitRefused
		}
		return &errcode.Error{Code: a.Error.Code, Message: a.Error.Message, Exit: exit}
	}
	return json.Unmarshal(a.Result, v)
}
