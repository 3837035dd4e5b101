// Command mosaic runs AI coding agents (or any command) as confined sessions:
// transient systemd user services started over D-Bus, confined by systemd's
// sandboxing properties and by a bubblewrap layer inside them.
//
// The same binary is also the session's exec shim (exec-bwrap), its init
// (init) and its ExecStopPost (session-ended), which the user never calls.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"mosaic/manager/records"
	"mosaic/units/errcode"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"mosaic/manager"
	"mosaic/sandbox"
)

func main() {
	// The sandbox's own stages come first and without the CLI library: they
	// run once per session start, and their argv is written by mosaic.
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "init":
			os.Exit(sandbox.Init(os.Args[2:]))
		case records.EndedStage: // the unit's ExecStopPost
			records.EndedMain(os.Args[2:], os.Getenv)
			os.Exit(0)
		case "egress": // a session's egress proxy unit
			err := sandbox.ServeEgressMain(os.Args[2:], func() { _, _ = daemon.SdNotify(false, daemon.SdNotifyReady) })
			fmt.Fprintf(os.Stderr, "mosaic egress: %v\n", err)
			os.Exit(1)
		case sandbox.ShimStage:
			err := sandbox.ShimMain(os.Args[2:])
			fmt.Fprintf(os.Stderr, "mosaic: refusing to build the sandbox: %v\n", err)
			os.Exit(sandbox.ExitSandboxRefused)
		}
	}
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run runs the CLI and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	out := &output{json: wantsJSON(args[1:]), stdout: stdout, stderr: stderr}
	app := &cli.App{
		Name:                      "mosaic",
		Usage:                     "run AI coding agents as confined systemd sessions",
		HideHelpCommand:           true,
		DisableSliceFlagSeparator: true, // a path may contain a comma
		Writer:                    stdout,
		ErrWriter:                 stderr,
		ExitErrHandler:            func(*cli.Context, error) {},
		OnUsageError:              usageError,
		Commands: []*cli.Command{
			startCommand(out), runCommand(out), stopCommand(out), listCommand(out), statusCommand(out), logsCommand(out), rmCommand(out), gcCommand(out), profilesCommand(out), loginCommand(out), homeCommand(out), doctorCommand(out), busCommand(out),
		},
		CommandNotFound: func(c *cli.Context, name string) {
			out.code = out.fail(errcode.Usage.New("unknown command %q: see `mosaic --help`", name))
		},
	}
	if err := app.Run(args); err != nil {
		return out.fail(err)
	}
	return out.code
}

// usageError turns the CLI library's parse errors (unknown flag, missing
// value) into bad input, exit 2.
func usageError(c *cli.Context, err error, _ bool) error {
	return errcode.Usage.New("%v: see `mosaic %s --help`", err, c.Command.Name)
}

// connected runs f with a connection to the user manager, closed after.
func connected(f func(ctx context.Context, m *manager.Manager) error) error {
	ctx := context.Background()
	m, err := manager.Connect(ctx)
	if err != nil {
		return err
	}
	defer m.Close()
	return f(ctx, m)
}

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
		fmt.Fprintf(o.stderr, "mosaic: %s\n", oneLine(e.Message))
	}
	return e.Exit
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", " | ") }

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
