package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"mosaic/credentials"
	"mosaic/internal/errcode"
	"mosaic/internal/termsafe"
	"mosaic/manager/statedir"
	"mosaic/sandbox"
	"mosaic/units"
)

// agentFlags are the session flags for agents: ordinary variables, a CA,
// and signing in.
func agentFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "env", Usage: "set `NAME=VALUE` in the session: a plain, non-secret variable (a base URL, a model, a switch), shown by mosaic status (repeatable)"},
		&cli.StringSliceFlag{Name: "pass-env", Usage: "pass `NAME` from this environment to the session as a plain, non-secret variable (repeatable)"},
		&cli.StringFlag{Name: "ca-file", Usage: "trust the CAs in PEM `FILE` besides the system's: bound read-only, named by NODE_EXTRA_CA_CERTS (Node, Bun), and a bundle of the system's roots and it by SSL_CERT_FILE, REQUESTS_CA_BUNDLE, PIP_CERT, CURL_CA_BUNDLE, GIT_SSL_CAINFO and CODEX_CA_CERTIFICATE"},
		&cli.BoolFlag{Name: "sign-in", Usage: "start without the profile's credentials, to sign the agent in inside; give --name to keep the login in that session's home"},
	}
}

// notes prints what mosaic read into a request (a custom endpoint's host
// allowed), one line each, on stderr, so --json output stays one document.
func (o *output) notes(lines []string) {
	for _, l := range lines {
		fmt.Fprintln(o.stderr, "mosaic: "+l)
	}
}

// signInCommands are what signs each built-in agent in.
var signInCommands = map[string][]string{
	"claude-code": {"claude"}, // then /login
	"codex":       {"codex", "login"},
	"opencode":    {"opencode", "auth", "login"},
	"pi":          {"pi"}, // then /login
}

func loginCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:  "login",
		Usage: "sign an agent in inside a session whose home keeps the login: mosaic login PROFILE (then mosaic run --name PROFILE -- AGENT)",
		Description: "mosaic login PROFILE [RUN-FLAGS...] [-- COMMAND...] is mosaic run --sign-in --profile PROFILE " +
			"--name PROFILE [RUN-FLAGS...] -- its sign-in command (claude, codex login, opencode auth login, pi): " +
			"the profile's network, no key needed. Later sessions of that name (mosaic run --name PROFILE -- claude) " +
			"find the login in their home.\n\nA sign-in needs no project: unless RUN-FLAGS name a --workspace, it runs " +
			"in an empty directory mosaic makes and removes afterwards, from wherever you run mosaic login (your home too).",
		ArgsUsage:       "PROFILE [RUN-FLAGS...] [-- COMMAND...]",
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
				return cli.ShowCommandHelp(c.Lineage()[1], c.Command.Name)
			}
			if len(args) < 1 || strings.HasPrefix(args[0], "-") {
				return errcode.Usage.New("mosaic login PROFILE: name the agent's profile first (claude-code, codex, opencode, pi)")
			}
			profile, flags, command := args[0], args[1:], []string(nil)
			for i, a := range flags {
				if a == "--" {
					flags, command = flags[:i], flags[i+1:]
					break
				}
			}
			if len(command) == 0 {
				command = signInCommands[profile]
			}
			if len(command) == 0 {
				return errcode.Usage.New("mosaic login %s: give the command that signs it in after --", profile)
			}
			runArgs := []string{"mosaic", "run", "--sign-in", "--profile", profile}
			named, placed := false, false
			for _, f := range flags {
				named = named || f == "--name" || strings.HasPrefix(f, "--name=")
				placed = placed || f == "--workspace" || f == "-w" || strings.HasPrefix(f, "--workspace=") || strings.HasPrefix(f, "-w=")
			}
			if !named {
				runArgs = append(runArgs, "--name", profile)
			}
			if !placed {
				// No project of yours is bound: the sign-in gets an
				// empty workspace of its own, removed after it.
				dir, err := os.MkdirTemp("", "mosaic-login-")
				if err != nil {
					return errcode.StateDir.New("cannot make an empty directory for the sign-in: %w (give one with --workspace DIR)", err)
				}
				defer statedir.RemoveTree(dir)
				runArgs = append(runArgs, "--workspace", dir)
			}
			runArgs = append(append(append(runArgs, flags...), "--"), command...)
			out.code = run(runArgs, out.stdout, out.stderr)
			return nil
		},
	}
}

func homeCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:  "home",
		Usage: "print a session's home directory (kept across sessions of that name), made 0700 if it is missing, to place an agent's configuration in",
		Description: "e.g. mkdir -p \"$(mosaic home --create fix-42)/.codex\" && cp config.toml \"$(mosaic home fix-42)/.codex/\"\n" +
			"Inside the session this directory is HOME (at your home's path).",
		ArgsUsage:    "NAME",
		Flags:        []cli.Flag{&cli.BoolFlag{Name: "create", Usage: "make the home of a session that has not run yet (without it, a name with no state is refused: a typo makes nothing)"}, jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return errcode.Usage.New("mosaic home NAME: name one session")
			}
			name := c.Args().First()
			if err := units.ValidateName(name); err != nil {
				return err
			}
			paths, err := out.userPaths()
			if err != nil {
				return err
			}
			home := filepath.Join(paths.SessionDir(name), "home")
			if _, err := os.Lstat(paths.SessionDir(name)); os.IsNotExist(err) && !c.Bool("create") {
				return errcode.NoSuchSession.New("no session named %s has run yet, so it has no home: check the name (mosaic list --all), or give --create to make its home before its first start", name)
			}
			for _, d := range []string{filepath.Dir(paths.SessionDir(name)), paths.SessionDir(name), home} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					return errcode.StateDir.New("cannot make %s: %w", d, err)
				}
			}
			// What a session left there may lead into your real home.
			links, repos, complete := sandbox.LookHome(home)
			for _, l := range links {
				// A name the session chose: escaped on any stderr, so that
				// a newline in it cannot forge a line of mosaic's.
				fmt.Fprintln(out.stderr, termsafe.Escape("mosaic: warning: "+l+": a symlink a session may have planted; inside the session it may be the session's own file, but on the host it leads out of the kept home (into your real home, or elsewhere): writing through it changes what is there (remove it first)", false))
			}
			for _, r := range repos {
				fmt.Fprintln(out.stderr, termsafe.Escape("mosaic: warning: "+r+": a git repository a session may have planted: a git that an editor or a shell prompt starts in or below it runs the commands its config names (core.fsmonitor, core.sshCommand, filters) on the host (remove it first)", false))
			}
			if !complete {
				fmt.Fprintf(out.stderr, "mosaic: warning: mosaic could not look through all of %s for symlinks into your real home (over %d entries, a directory it cannot read, or one nested too deep to name): check it before you write into it\n", home, sandbox.HomeLinksBudget)
			}
			out.result(map[string]any{"name": name, "home": home, "home_inside": paths.Home,
				"credentials_dir": credentials.ProfileDir(paths.Home), "links_out": links, "git_repositories": repos, "links_complete": complete},
				func(w io.Writer) { fmt.Fprintln(w, home) })
			return nil
		},
	}
}
