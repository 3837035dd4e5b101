package main

import (
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// Help fits a terminal: each flag's names and placeholder on a line of its
// own, its usage wrapped below it, at the terminal's width (80 columns when
// not on a terminal, or on a wider one: long lines are hard to read).
func init() {
	cli.FlagStringer = flagHelp
	cli.HelpPrinter = func(w io.Writer, templ string, data any) {
		cli.HelpPrinterCustom(w, templ, data, map[string]any{"wrapAt": func() int { return helpWidth(w) }})
	}
}

func helpWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col >= 40 && ws.Col < 80 {
			return int(ws.Col)
		}
	}
	return 80
}

// flagHelp renders one flag: "--memory-max SIZE" and its usage on the next
// line.
func flagHelp(f cli.Flag) string {
	if _, ok := f.(cli.DocGenerationFlag); !ok {
		return strings.Join(f.Names(), ", ")
	}
	placeholder, usage := flagParts(f)
	var names []string
	for _, n := range f.Names() {
		dash := "--"
		if len(n) == 1 {
			dash = "-"
		}
		name := dash + n
		if placeholder != "" {
			name += " " + placeholder
		}
		names = append(names, name)
	}
	return strings.Join(names, ", ") + "\n" + usage
}

// flagParts are what help and the man page say of a flag besides its names:
// the placeholder of its value (the usage's `BACKQUOTED` word; VALUE if it
// takes a value and names none) and its usage, with its default if it has
// one worth saying.
func flagParts(f cli.Flag) (placeholder, usage string) {
	df, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return "", ""
	}
	usage = df.GetUsage()
	if i := strings.IndexByte(usage, '`'); i >= 0 {
		if j := strings.IndexByte(usage[i+1:], '`'); j >= 0 {
			placeholder = usage[i+1 : i+1+j]
			usage = usage[:i] + placeholder + usage[i+2+j:]
		}
	}
	if placeholder == "" && df.TakesValue() {
		placeholder = "VALUE"
	}
	if d := df.GetDefaultText(); d != "" && d != "false" && d != "-1" && d != `""` {
		usage += " (default: " + strings.Trim(d, `"`) + ")"
	}
	return placeholder, usage
}

// examples are two or three typical uses of each verb, shown in its help.
var examples = map[string][]string{
	"start":    {"mosaic start --name fix-42 -w ~/src/app -- codex exec \"fix issue 42\"", "mosaic start --clone --name fix-43 -w ~/src/app -- claude -p \"fix #43\"", "mosaic start --memory-max 4G --runtime-max 2h -- claude -p \"add tests\"", "mosaic start --network allow --allow-host api.example.com -- ./agent.sh", "mosaic start --allow-host @packages -- claude"},
	"run":      {"mosaic run -- claude", "mosaic run --name scratch -w ~/src/app -- bash", "mosaic run --scope --pty=false -- make test"},
	"stop":     {"mosaic stop fix-42", "mosaic stop fix-42 fix-43 --timeout 2s", "mosaic stop fix-42 --json"},
	"attach":   {"mosaic start --pty --name agent -- claude", "mosaic attach agent   # Ctrl-P Ctrl-Q detaches"},
	"list":     {"mosaic list", "mosaic list --all", "mosaic list --json"},
	"status":   {"mosaic status fix-42", "mosaic status fix-42 --json"},
	"logs":     {"mosaic logs fix-42", "mosaic logs fix-42 -f", "mosaic logs fix-42 -n 50 -o short-iso", "mosaic logs fix-42 --egress"},
	"allow":    {"mosaic allow fix-42 @npm", "mosaic allow fix-42 pypi.org files.pythonhosted.org --for 10min", "mosaic allow fix-42 gitlab.example.com:8443 --json"},
	"deny":     {"mosaic deny fix-42 @npm", "mosaic deny fix-42 api.example.com --json"},
	"rm":       {"mosaic rm fix-42", "mosaic rm -f fix-42 fix-43"},
	"diff":     {"mosaic diff fix-42", "mosaic diff fix-42 --stat", "mosaic diff fix-42 --json"},
	"apply":    {"mosaic apply fix-42", "mosaic apply --branch fix-42", "mosaic apply fix-42 --branch agent/fix-42"},
	"discard":  {"mosaic discard fix-42"},
	"gc":       {"mosaic gc", "mosaic gc --json"},
	"profiles": {"mosaic profiles", "mosaic profiles --json", "mosaic profiles --groups"},
	"doctor":   {"mosaic doctor", "mosaic doctor --probe"},
}

// withExamples appends each verb's examples to its description.
func withExamples(cmds []*cli.Command) {
	for _, c := range cmds {
		ex := examples[c.Name]
		if len(ex) == 0 {
			continue
		}
		// Descriptions are wrapped at the terminal's width, not at their
		// own line breaks.
		c.Description = strings.ReplaceAll(c.Description, "\n", " ")
		if c.Description != "" {
			c.Description += "\n\n"
		}
		c.Description += "Examples:\n   " + strings.Join(ex, "\n   ")
	}
}

// fitWidth returns the width tables are cut to on stdout: the terminal's,
// or 0 (no cut) for a pipe or with --full.
func fitWidth(out *output, full bool) int {
	f, ok := out.stdout.(*os.File)
	if full || !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 {
		return 0
	}
	return int(ws.Col)
}

// cutLines cuts each line of text to width columns (counting runes), ending
// a cut line with "…", as systemctl does on a terminal; 0 cuts nothing.
func cutLines(text string, width int) string {
	if width <= 0 {
		return text
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if r := []rune(l); len(r) > width {
			lines[i] = string(r[:width-1]) + "…"
		}
	}
	return strings.Join(lines, "\n")
}

// wrapLines wraps each line of text longer than width at its last space
// that fits (or hard, for a long path), continuing under where the line's
// value began ("label:   value", or its own indentation); 0 wraps nothing.
// Nothing is lost, unlike cutLines: for status and doctor.
func wrapLines(text string, width int) string {
	if width <= 20 {
		return text
	}
	var out []string
	for _, l := range strings.Split(text, "\n") {
		indent := len(l) - len(strings.TrimLeft(l, " "))
		if m := labelPrefix(l); m > indent {
			indent = m
		}
		if indent > width/2 {
			indent = 4
		}
		pad := strings.Repeat(" ", indent)
		for len([]rune(l)) > width {
			r := []rune(l)
			cut := strings.LastIndexByte(string(r[:width]), ' ')
			if cut <= indent {
				cut = len(string(r[:width])) // no space to break at: a hard break
			}
			out = append(out, strings.TrimRight(l[:cut], " "))
			l = pad + strings.TrimLeft(l[cut:], " ")
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// labelPrefix is the width of a "label:   " prefix, or of doctor's
// "ok   name               " one, or 0.
func labelPrefix(l string) int {
	for _, mark := range []string{"ok   ", "warn ", "FAIL ", "     "} {
		if strings.HasPrefix(l, mark) && len(l) > 24 && l[23] == ' ' && l[5] != ' ' {
			return 24
		}
	}
	i := strings.Index(l, ":  ")
	if i <= 0 || i > 20 || strings.ContainsAny(l[:i], " /") {
		return 0
	}
	j := i + 1
	for j < len(l) && l[j] == ' ' {
		j++
	}
	return j
}
