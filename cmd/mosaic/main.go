// Command mosaic runs AI coding agents (or any command) as confined sessions:
// transient systemd user services started over D-Bus, confined by systemd's
// sandboxing properties and by a bubblewrap layer inside them.
//
// The same binary is also the session's broker units (the egress proxy, the
// publish forwarder, a start --pty session's terminal holder) and the other
// end of --host, which the user never calls. The stages inside a session
// (its exec shim, init, session-ended stage) are the second binary's,
// cmd/mosaic-stage, installed beside this one.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"mosaic/internal/errcode"
	"mosaic/internal/termsafe"
	"mosaic/manager/records"
	"mosaic/manager/request"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"mosaic/manager"
	"mosaic/manager/clone"
	"mosaic/manager/remote"
	"mosaic/manager/statedir"
	"mosaic/sandbox"
	"mosaic/sandbox/agentfilter"
	"mosaic/sandbox/egress"
	"mosaic/sandbox/ptyhold"
	"mosaic/sandbox/publish"
)

func main() {
	// The broker stages come first and without the CLI library: their argv
	// is written by mosaic.
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case sandbox.EndedStage: // the ExecStopPost of a unit a mosaic before mosaic-stage started
			records.EndedMain(os.Args[2:], os.Getenv)
			os.Exit(0)
		case egress.Stage: // a session's egress proxy unit
			os.Exit(egress.Main(os.Args[2:], func() { _, _ = daemon.SdNotify(false, daemon.SdNotifyReady) }))
		case publish.Stage: // a session's publish forwarder unit
			os.Exit(publish.Main(os.Args[2:], func() { _, _ = daemon.SdNotify(false, daemon.SdNotifyReady) }))
		case agentfilter.Stage: // a session's ssh agent filter unit
			os.Exit(agentfilter.Main(os.Args[2:], func() { _, _ = daemon.SdNotify(false, daemon.SdNotifyReady) }))
		case ptyhold.Stage: // the unit holding a start --pty session's terminal
			os.Exit(ptyhold.Main(os.Args[2:], func() { _, _ = daemon.SdNotify(false, daemon.SdNotifyReady) }))
		case clone.SpareStage: // the unit that makes a repository's spare copy for its next session
			os.Exit(clone.SpareMain(os.Args[2:]))
		case statedir.RemoveStage: // the unit that removes a forgotten session's state
			os.Exit(statedir.RemoveMain(os.Args[2:]))
		case remote.ExecStage: // mosaic --host on the other end of ssh
			os.Exit(remoteExec(os.Args[2:]))
		case remote.HoldStage:
			os.Exit(remoteHold(os.Args[2:]))
		}
	}
	code, sig := runCLI(os.Args, os.Stdout, os.Stderr)
	if sig != nil {
		dieOf(sig)
	}
	os.Exit(code)
}

// run runs the CLI and returns the exit code: on another machine, with
// --host (-H, MOSAIC_HOST), else here.
func run(args []string, stdout, stderr io.Writer) int {
	code, _ := runCLI(args, stdout, stderr)
	return code
}

// runCLI runs the CLI, here or (--host) on other machines, and returns the
// exit code, and the signal mosaic should die of instead, if any (see
// output.dieOf).
func runCLI(args []string, stdout, stderr io.Writer) (int, os.Signal) {
	call, err := hostArgs(args[1:], os.Getenv)
	if err != nil {
		return (&output{json: wantsJSON(args[1:]), stdout: stdout, stderr: stderr}).fail(err), nil
	}
	if len(call.targets) > 0 {
		return remoteMain(call, stdout, stderr), nil
	}
	return runHereDying(append([]string{args[0]}, call.args...), stdout, stderr)
}

// runHere runs the CLI against this machine's user manager.
func runHere(args []string, stdout, stderr io.Writer) int {
	code, _ := runHereDying(args, stdout, stderr)
	return code
}

// runHereDying is runHere with the signal mosaic should die of, if any.
func runHereDying(args []string, stdout, stderr io.Writer) (int, os.Signal) {
	out := &output{json: wantsJSON(args[1:]), stdout: stdout, stderr: stderr}
	app := newApp(out)
	if err := app.Run(reorderArgs(app, args)); err != nil {
		return out.fail(err), nil
	}
	return out.code, out.dieOf
}

// dieOf ends mosaic by sig's default action (the Go runtime's handler
// gone), so that its parent sees a death by that signal.
func dieOf(sig os.Signal) {
	signal.Reset(sig)
	s := sig.(unix.Signal)
	_ = unix.Tgkill(unix.Getpid(), unix.Gettid(), s)
	_ = unix.Kill(unix.Getpid(), s)
	time.Sleep(time.Second) // the signal is on its way
}

// newApp is mosaic's command line.
func newApp(out *output) *cli.App {
	app := &cli.App{
		Name:                      "mosaic",
		Usage:                     "run AI coding agents as confined systemd sessions, each in its own copy of your workspace by default (review with mosaic diff, take with mosaic apply; --direct writes your checkout in place)",
		Version:                   thisVersion().String(),
		DisableSliceFlagSeparator: true, // a path may contain a comma
		Writer:                    out.stdout,
		ErrWriter:                 out.stderr,
		ExitErrHandler:            func(*cli.Context, error) {},
		OnUsageError:              usageError,
		// Taken off the command line before the library sees it (run);
		// declared here for help, the man page and completion.
		Flags: []cli.Flag{&cli.StringSliceFlag{Name: "host", Aliases: []string{"H"}, EnvVars: []string{"MOSAIC_HOST"},
			Usage: "run the command on `[USER@]HOST[:PORT]` over your ssh, against that machine's mosaic and user manager (list: repeatable, or --all-hosts for ~/.config/mosaic/hosts)"}},
		Commands: []*cli.Command{
			startCommand(out), runCommand(out), stopCommand(out), listCommand(out), statusCommand(out), attachCommand(out), logsCommand(out), auditCommand(out), allowCommand(out), denyCommand(out), approveCommand(out), rmCommand(out), gcCommand(out), diffCommand(out), applyCommand(out), discardCommand(out), profilesCommand(out), policyCommand(out), trustCommand(out), loginCommand(out), homeCommand(out), doctorCommand(out), busCommand(out), versionCommand(out),
			completionCommand(out),
		},
	}
	withExamples(app.Commands)
	again := func() *cli.App { return newApp(out) }
	app.Commands = append(app.Commands, completeCommand(out, again), manCommand(out, again))
	namesOnce(app.Commands)
	app.CommandNotFound = func(c *cli.Context, name string) {
		out.code = out.fail(errcode.Usage.New("unknown command %q%s: see `mosaic help`", name, suggestion(name, commandNames(app.Commands))))
	}
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintf(c.App.Writer, "mosaic %s\n", c.App.Version) }
	return app
}

// versionCommand prints mosaic's version (also `mosaic --version`).
func versionCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:         "version",
		Usage:        "print mosaic's version and the commit it was built from",
		Flags:        []cli.Flag{jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			v := thisVersion()
			out.result(v, func(w io.Writer) { fmt.Fprintf(w, "mosaic %s\n", v) })
			return nil
		},
	}
}

func commandNames(cmds []*cli.Command) []string {
	var names []string
	for _, c := range cmds {
		names = append(names, c.Name)
	}
	return names
}

// usageError turns the CLI library's parse errors (unknown flag, missing
// value) into bad input, exit 2, with a guess at a mistyped flag.
func usageError(c *cli.Context, err error, _ bool) error {
	msg := err.Error()
	if _, flag, ok := strings.Cut(msg, "flag provided but not defined: "); ok {
		var names []string
		flags := c.App.Flags
		if c.Command != nil && c.Command.Name != "" {
			flags = c.Command.Flags
		}
		for _, f := range flags {
			for _, n := range f.Names() {
				if len(n) > 1 {
					names = append(names, "--"+n)
				}
			}
		}
		msg = "unknown flag --" + strings.TrimLeft(flag, "-") + suggestion("--"+strings.TrimLeft(flag, "-"), names)
	}
	return errcode.Usage.New("%s: see `%s --help`", msg, commandPath(c))
}

// connected runs f with a connection to the user manager, closed after,
// the manager given the paths this command line read.
func (o *output) connected(f func(ctx context.Context, m *manager.Manager) error) error {
	return connectedWith(o.managerOptions(manager.Options{TieSelf: true, Say: sayOnStderr}), f) // one command, then mosaic exits
}

// connectedWith runs f with a connection to the user manager of opts,
// closed after; without an output (approve's answers), the manager reads
// the user's paths itself.
func connectedWith(opts manager.Options, f func(ctx context.Context, m *manager.Manager) error) error {
	ctx := context.Background()
	m, err := manager.Connect(ctx, opts)
	if err != nil {
		return err
	}
	defer m.Close()
	return f(ctx, m)
}

// sayOnStderr prints a line the manager has for the user (Options.Say).
func sayOnStderr(line string) { fmt.Fprintln(os.Stderr, line) }

// wantsJSON reports whether --json is among the options (before any --), so
// that even a parse error is reported as JSON.
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--json" || a == "-json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// output prints results and errors as text or, with --json, as one JSON
// document on stdout.
type output struct {
	json           bool
	stdout, stderr io.Writer
	code           int // the exit code a command chose (mosaic run)
	// dieOf, when set, is the signal mosaic dies of instead of exiting
	// with code: a run whose command Ctrl-C ended, as a shell's child
	// should (the shell then prints its prompt on a new line, and a loop
	// running mosaic stops).
	dieOf os.Signal
	// The user's paths (request.UserPaths), read from the environment
	// once per command line, at the first command that needs them
	// (userPaths), and passed down from there.
	pathsOnce sync.Once
	paths     request.Paths
	pathsErr  error
}

// userPaths is the user's paths, derived from the environment on first use
// and kept for the rest of this command line: the one place the CLI reads
// them (the manager holds its own, Manager.Paths).
func (o *output) userPaths() (request.Paths, error) {
	o.pathsOnce.Do(func() { o.paths, o.pathsErr = request.UserPaths() })
	return o.paths, o.pathsErr
}

// managerOptions are opts with the user's paths as this command line read
// them (userPaths), so that the manager and its plans use the same; when
// they cannot be read, the manager says why.
func (o *output) managerOptions(opts manager.Options) manager.Options {
	if p, err := o.userPaths(); err == nil {
		opts.Paths = &p
	}
	return opts
}

// onTerminal reports whether w is a terminal, where control characters a
// session chose are escaped (see escapeControls).
func onTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f)
}

// safe is s as printed on stdout: escaped on a terminal, exact elsewhere.
func (o *output) safe(s string) string {
	if onTerminal(o.stdout) {
		return termsafe.Escape(s, false)
	}
	return s
}

func (o *output) result(v any, text func(io.Writer)) {
	if o.json {
		enc := json.NewEncoder(o.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
		return
	}
	text(o.stdout)
}

// fail reports err and returns its exit code.
func (o *output) fail(err error) int {
	e := errcode.Of(err)
	if o.json {
		_ = json.NewEncoder(o.stdout).Encode(map[string]any{"error": map[string]string{"code": e.Code, "message": e.Message}})
	} else {
		msg := oneLine(e.Message)
		if onTerminal(o.stderr) {
			msg = termsafe.Escape(msg, false)
		}
		fmt.Fprintf(o.stderr, "mosaic: %s\n", msg)
	}
	return e.Exit
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", " | ") }

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
