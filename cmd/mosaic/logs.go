package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"mosaic/internal/errcode"

	"github.com/urfave/cli/v2"

	"mosaic/manager"
	"mosaic/manager/records"
	"mosaic/units"
)

// logFormats are the journalctl output modes logs passes on.
var logFormats = map[string]bool{"cat": true, "short": true, "short-iso": true, "short-precise": true, "json": true, "json-pretty": true, "verbose": true}

// followPoll is how often logs -f reads new lines, and flushGrace how long
// it still reads after the session ended, for lines journald is writing.
const (
	followPoll = 200 * time.Millisecond
	flushGrace = 300 * time.Millisecond
)

func logsCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:      "logs",
		Usage:     "show a session's output (stdout and stderr) from the journal, also after it ended",
		ArgsUsage: "NAME",
		Description: "Reads the user's journal for the session's identifier: journalctl --user -t mosaic-NAME shows the same\n" +
			"lines, and so does journalctl --user -u mosaic-NAME.service, but for the last lines of a command that exits\n" +
			"at once, which journald may store before it knows their unit.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new lines; return when the session ends"},
			&cli.IntFlag{Name: "lines", Aliases: []string{"n"}, Usage: "only the last `N` lines", Value: -1},
			&cli.StringFlag{Name: "since", Usage: "only lines since `TIME`, as journalctl takes it (e.g. \"10 min ago\", \"2026-11-29 12:00\")"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "`FORMAT`: cat, short, short-iso, short-precise, json, json-pretty or verbose", Value: "cat"},
			&cli.BoolFlag{Name: "json", Usage: "the same as -o json: one JSON object per line, as journalctl writes them"},
			&cli.BoolFlag{Name: "egress", Usage: "show the session's egress proxy's lines instead: its tunnels, refusals, grants and revocations"},
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			name, err := oneName(c)
			if err != nil {
				return err
			}
			format := c.String("output")
			if c.Bool("json") {
				format = "json"
			}
			if !logFormats[format] {
				return errcode.Usage.New("-o %s is not an output format of mosaic logs: use cat, short, short-iso, short-precise, json, json-pretty or verbose", format)
			}
			began := time.Now()
			return out.connected(func(ctx context.Context, m *manager.Manager) error {
				s, err := m.Status(ctx, name)
				if err != nil {
					return err
				}
				egressOnly := c.Bool("egress")
				if err := journaled(s, name, egressOnly); err != nil {
					return err
				}
				base := journalMatch(name, s.Output, format, egressOnly)
				first := firstLines(c, base, began)
				if !c.Bool("follow") || !s.Running() {
					err = journalctl(first)
				} else {
					err = follow(ctx, m, name, first, base)
				}
				warnDropped(s)
				if err == nil {
					err = outputLost(m, name)
				}
				return err
			})
		},
	}
}

// journaled refuses the logs session s (name) has none of: the proxy's
// (egressOnly) of a session without one, the output of one that ran in
// the foreground (a scope, or a run on a terminal).
func journaled(s manager.Session, name string, egressOnly bool) error {
	if egressOnly && s.Network != "allow" {
		return errcode.NoEgress.New("session %s has network %s, not allow: it has no egress proxy", name, orDash(s.Network))
	}
	if !egressOnly && (s.Kind == units.KindScope || s.Output == "terminal") {
		if s.Running() {
			return errcode.NoLogs.New("session %s runs in the foreground (mosaic run): its output goes to the terminal or pipes it runs on, not to the journal; start it with mosaic start to keep its output", name)
		}
		return errcode.NoLogs.New("session %s ran in the foreground (mosaic run): its output went to the terminal or pipes it ran on, not to the journal; start it with mosaic start to keep its output", name)
	}
	return nil
}

// journalMatch is journalctl's arguments for session name's lines (its
// terminal holder's for output pty, its egress proxy's with egressOnly)
// in format.
func journalMatch(name, output, format string, egressOnly bool) []string {
	// journalctl, not go-systemd's sdjournal: sdjournal links
	// libsystemd through cgo, and mosaic is one static binary that
	// is also bound into every sandbox as its init. The match is
	// SYSLOG_IDENTIFIER (the unit's SyslogIdentifier, in every
	// stream's header), not MOSAIC_SESSION, which journald does not
	// apply to a user manager's units, nor the unit, which it can
	// miss for the last lines of a command that exits at once.
	base := []string{"--user", "-t", units.UnitPrefix + name, "--no-pager", "-q", "-o", format}
	if !egressOnly && output == "pty" {
		// A start --pty session's terminal holder writes what
		// the session printed while nobody was attached, as text
		// lines, to the journal (ptyhold's plain); attach has
		// the terminal's own bytes.
		ptyUnit := units.PTYUnitName(name)
		base = []string{"--user", "-t", strings.TrimSuffix(ptyUnit, units.UnitSuffix), "_SYSTEMD_USER_UNIT=" + ptyUnit, "--no-pager", "-q", "-o", format}
	}
	if egressOnly {
		// The proxy's identifier and its unit: journald sets the
		// unit (a trusted field) from the sender's cgroup, so a
		// session that writes a line with the proxy's identifier
		// into the journal does not get it shown here. The proxy
		// runs as long as its session, so its lines have their unit.
		egressUnit := units.EgressUnitName(name)
		base = []string{"--user", "-t", strings.TrimSuffix(egressUnit, units.UnitSuffix), "_SYSTEMD_USER_UNIT=" + egressUnit, "--no-pager", "-q", "-o", format}
	}
	return base
}

// firstLines is the first journalctl's arguments: base and the lines
// asked (--lines, --since; with --lines 0 and --follow, only those after
// began).
func firstLines(c *cli.Context, base []string, began time.Time) []string {
	first := append([]string{}, base...)
	if n := c.Int("lines"); n > 0 || (n == 0 && !c.Bool("follow")) {
		first = append(first, "-n", strconv.Itoa(n))
	} else if n == 0 {
		first = append(first, "--since", fmt.Sprintf("@%d.%06d", began.Unix(), began.Nanosecond()/1000))
	}
	if v := c.String("since"); v != "" {
		first = append(first, "--since", v)
	}
	return first
}

// warnDropped says on stderr when journald dropped lines since s started.
func warnDropped(s manager.Session) {
	if s.Since == nil || s.Kind == units.KindScope {
		return
	}
	if n := journalDropped(*s.Since); n > 0 {
		fmt.Fprintln(os.Stderr, "mosaic: warning: "+droppedWarning(n))
	}
}

// follow prints the session's lines as they come and returns once it has
// ended and its last lines are in. It reads through a cursor file rather
// than journalctl -f, which would have to be killed at a guessed moment and
// could lose the last lines.
func follow(ctx context.Context, m *manager.Manager, name string, first, base []string) error {
	dir, err := os.MkdirTemp("", "mosaic-logs-")
	if err != nil {
		return errcode.StateDir.New("cannot make a cursor file: %w", err)
	}
	defer os.RemoveAll(dir)
	cursor := "--cursor-file=" + filepath.Join(dir, "cursor")
	ended := make(chan error, 1)
	go func() { ended <- m.WaitEnded(ctx, name) }()
	args := first
	for {
		if err := journalctl(append(args, cursor)); err != nil && err != errNoEntries {
			return err
		}
		if _, err := os.Stat(filepath.Join(dir, "cursor")); err == nil {
			args = base // from now on the cursor says where to go on
		}
		select {
		case <-ended:
			time.Sleep(flushGrace)
			if err := journalctl(append(args, cursor)); err != errNoEntries {
				return err
			}
			return nil
		case <-time.After(followPoll):
		}
	}
}

// errNoEntries is journalctl's answer, with --cursor-file, while nothing
// matches: systemd 252's exits 1 without a word (it has no cursor to
// write), e.g. for a session that has not written its first line yet.
var errNoEntries = errors.New("no journal entries yet")

// journalctl runs journalctl with args onto stdout.
func journalctl(args []string) error {
	cmd := exec.Command("journalctl", args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = os.Stdout, &stderr
	// A session's output may hold escape sequences meant for the user's
	// terminal: there, they are shown escaped; a pipe gets the exact bytes.
	if isTerminal(os.Stdout) {
		sw := &safeWriter{w: os.Stdout}
		cmd.Stdout = sw
		defer sw.Flush()
	}
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			return errcode.NoJournal.New("cannot run journalctl: %w (install systemd's journalctl)", err)
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" && cmd.ProcessState.ExitCode() == 1 && slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--cursor-file=") }) {
			return errNoEntries
		}
		if msg == "" {
			msg = err.Error()
		}
		return errcode.Usage.New("journalctl refused: %s", oneLine(msg))
	}
	return nil
}

// outputLost is the error for a session whose output reached no journal
// (records.OutputLost), which would otherwise show as one that printed
// nothing.
func outputLost(m *manager.Manager, name string) error {
	p, err := m.Paths()
	if err != nil || !records.OutputLost(p.SessionDir(name)) {
		return nil
	}
	return errcode.OutputLost.New("session %s's output reached no journal: journald was not running (or not reachable) when it started, and systemd then sends a unit's output to /dev/null, so it is lost; check `systemctl status systemd-journald`, then start the session again", name)
}
