package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"mosaic/credentials"
	"mosaic/internal/errcode"
	"mosaic/manager"
)

// Shell completion: each shell's script (mosaic completion bash|zsh|fish)
// asks mosaic itself for the words (`mosaic __complete WORD...`), so that
// verbs, flags, session names (from systemd and the records) and profile
// names complete the same in every shell and never drift from the code.

const bashCompletion = `# bash completion for mosaic (mosaic completion bash)
_mosaic() {
	local cur=${COMP_WORDS[COMP_CWORD]}
	local IFS=$'\n'
	COMPREPLY=($(compgen -W "$(mosaic __complete "${COMP_WORDS[@]:1:COMP_CWORD-1}" 2>/dev/null)" -- "$cur"))
}
complete -o default -F _mosaic mosaic
`

const zshCompletion = `#compdef mosaic
# zsh completion for mosaic (mosaic completion zsh)
_mosaic() {
	local -a words_
	words_=(${(f)"$(mosaic __complete "${(@)words[2,CURRENT-1]}" 2>/dev/null)"})
	compadd -a words_
}
compdef _mosaic mosaic 2>/dev/null || true
`

const fishCompletion = `# fish completion for mosaic (mosaic completion fish)
complete -c mosaic -f -a '(mosaic __complete (commandline -opc)[2..-1] 2>/dev/null)'
`

func completionCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script for bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		UsageText: "mosaic completion bash > ~/.local/share/bash-completion/completions/mosaic\n" +
			"mosaic completion zsh > ~/.zfunc/_mosaic        # with fpath+=~/.zfunc in ~/.zshrc\n" +
			"mosaic completion fish > ~/.config/fish/completions/mosaic.fish\n" +
			"(make install puts all three in place)",
		Flags:        []cli.Flag{jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			scripts := map[string]string{"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion}
			script, ok := scripts[c.Args().First()]
			if c.NArg() != 1 || !ok {
				return errcode.Usage.New("mosaic completion takes one shell: bash, zsh or fish")
			}
			out.result(map[string]string{"shell": c.Args().First(), "script": script}, func(w io.Writer) { fmt.Fprint(w, script) })
			return nil
		},
	}
}

// completeCommand answers a shell's completion script: the words that may
// come after args.
func completeCommand(out *output, app func() *cli.App) *cli.Command {
	return &cli.Command{
		Name:            "__complete",
		Hidden:          true,
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			for _, w := range completions(app(), c.Args().Slice()) {
				fmt.Fprintln(out.stdout, w)
			}
			return nil
		},
	}
}

// completions are the words that may follow args (the words typed so far
// after `mosaic`, the one being typed excluded).
func completions(app *cli.App, args []string) []string {
	cmds := app.Commands
	var cmd *cli.Command
	i := 0
	for ; i < len(args); i++ {
		c := findCommand(cmds, args[i])
		if c == nil {
			break
		}
		cmd, cmds = c, c.Subcommands
	}
	if cmd == nil || (len(cmd.Subcommands) > 0 && i == len(args)) {
		var words []string
		for _, c := range cmds {
			if !c.Hidden {
				words = append(words, c.Name)
			}
		}
		return words
	}
	rest := args[i:]
	for _, a := range rest {
		if a == "--" {
			return nil // the session's command: the shell's own completion
		}
	}
	if n := len(rest); n > 0 {
		switch strings.TrimLeft(rest[n-1], "-") {
		case "profile":
			return profileNames()
		case "network":
			return []string{"none", "allow", "host"}
		case "workspace", "w", "ro", "rw", "env-file":
			return nil // a path: the shell's own completion
		}
		if strings.HasPrefix(rest[n-1], "-") && takesValue(cmd, rest[n-1]) {
			return nil
		}
	}
	words := flagNames(cmd)
	if takesNames(cmd) && cmd.ArgsUsage != "" {
		words = append(words, sessionNames()...)
	}
	return words
}

func flagNames(cmd *cli.Command) []string {
	var words []string
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if len(n) > 1 {
				words = append(words, "--"+n)
			}
		}
	}
	return words
}

// sessionNames are the sessions systemd and the records know, for
// completion: quietly none when the manager cannot be reached.
func sessionNames() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 2e9)
	defer cancel()
	m, err := manager.Connect(ctx, manager.Options{})
	if err != nil {
		return nil
	}
	defer m.Close()
	list, err := m.ListAll(ctx)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(list))
	for _, s := range list {
		names = append(names, s.Name)
	}
	return names
}

func profileNames() []string {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil
	}
	list, _ := credentials.Profiles(credentials.ProfileDir(home))
	names := make([]string, 0, len(list))
	for _, p := range list {
		names = append(names, p.Name)
	}
	return names
}

// manCommand prints the man page (troff), rendered from the commands.
func manCommand(out *output, app func() *cli.App) *cli.Command {
	return &cli.Command{
		Name:   "man",
		Hidden: true,
		Usage:  "print mosaic(1), the man page (make install puts it in place)",
		Flags:  []cli.Flag{jsonFlag},
		Action: func(c *cli.Context) error {
			var b strings.Builder
			if err := writeMan(&b, app()); err != nil {
				return err
			}
			out.result(map[string]string{"man": b.String()}, func(w io.Writer) { io.WriteString(w, b.String()) })
			return nil
		},
	}
}
