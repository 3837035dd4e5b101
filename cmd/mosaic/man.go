package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

// writeMan writes mosaic(1) in roff (man(7) macros) from the command tree:
// each visible command with its usage, description and flags. mosaic writes
// it itself rather than with urfave/cli's ToMan, which goes through a
// Markdown renderer (blackfriday) whose package init, a table of 2,000 HTML
// entities, ran at every start of the binary: three starts per session (the
// CLI, the exec shim, the init). The build leaves urfave/cli's docs out
// (-tags urfave_cli_no_docs, see the Makefile).
func writeMan(w io.Writer, app *cli.App) error {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH %s 1\n.nh\n.ad l\n", strings.ToUpper(app.Name))
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", roffText(app.Name), roffText(app.Usage))
	fmt.Fprintf(&b, ".SH SYNOPSIS\n.B %s\n.I COMMAND\n[\\fIOPTIONS\\fR] [\\fIARGUMENTS\\fR...]\n", roffText(app.Name))
	if app.Description != "" {
		b.WriteString(".SH DESCRIPTION\n")
		writeManText(&b, app.Description)
	}
	b.WriteString(".SH COMMANDS\n")
	writeManCommands(&b, "", app.Name, app.Commands)
	b.WriteString(".SH SEE ALSO\n.BR systemd-run (1),\n.BR bwrap (1),\n.BR systemctl (1)\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeManCommands writes each visible command under a heading of its
// path below the app ("bus serve"), then its subcommands.
func writeManCommands(b *strings.Builder, heading, parent string, cmds []*cli.Command) {
	for _, c := range cmds {
		if c.Hidden {
			continue
		}
		path := parent + " " + c.Name
		fmt.Fprintf(b, ".SS %s\n", roffText(strings.TrimSpace(heading+" "+strings.Join(c.Names(), ", "))))
		if len(c.Subcommands) == 0 {
			usage := strings.TrimSpace(path + " [OPTIONS] " + c.ArgsUsage)
			if c.UsageText == "" {
				fmt.Fprintf(b, ".B %s\n.br\n", roffText(usage))
			}
		}
		if c.Usage != "" {
			fmt.Fprintf(b, "%s\n", roffText(c.Usage))
		}
		if c.UsageText != "" {
			writeManExample(b, strings.Split(strings.Trim(c.UsageText, "\n"), "\n"))
		}
		if c.Description != "" {
			writeManText(b, c.Description)
		}
		for _, f := range c.VisibleFlags() {
			writeManFlag(b, f)
		}
		writeManCommands(b, strings.TrimSpace(heading+" "+c.Name), path, c.Subcommands)
	}
}

// writeManText writes a description: paragraphs split at blank lines, and
// the "Examples:" block withExamples appends (indented lines) as an example.
func writeManText(b *strings.Builder, text string) {
	for _, para := range strings.Split(text, "\n\n") {
		lines := strings.Split(strings.Trim(para, "\n"), "\n")
		if len(lines) > 1 && strings.HasPrefix(lines[1], "   ") {
			fmt.Fprintf(b, ".PP\n%s\n", roffText(lines[0]))
			writeManExample(b, lines[1:])
			continue
		}
		fmt.Fprintf(b, ".PP\n%s\n", roffText(strings.Join(lines, " ")))
	}
}

func writeManExample(b *strings.Builder, lines []string) {
	b.WriteString(".PP\n.RS 4\n.nf\n")
	for _, l := range lines {
		fmt.Fprintf(b, "%s\n", roffText(strings.TrimSpace(l)))
	}
	b.WriteString(".fi\n.RE\n")
}

// writeManFlag writes one flag as a tagged paragraph: its names in bold, its
// placeholder (the usage's `BACKQUOTED` word, as in --help) in italics.
func writeManFlag(b *strings.Builder, f cli.Flag) {
	placeholder, usage := flagParts(f)
	var names []string
	for _, n := range f.Names() {
		dash := "\\-\\-"
		if len(n) == 1 {
			dash = "\\-"
		}
		name := "\\fB" + dash + roffText(n) + "\\fR"
		if placeholder != "" {
			name += " \\fI" + roffText(placeholder) + "\\fR"
		}
		names = append(names, name)
	}
	fmt.Fprintf(b, ".TP\n%s\n%s\n", strings.Join(names, ", "), roffText(usage))
}

// roffText escapes text for roff: a backslash is printed by \e, and a line
// starting with . or ' would be a request.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}
