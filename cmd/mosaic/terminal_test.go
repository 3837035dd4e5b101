package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// nNull is the N_NULL line discipline (linux/tty.h): a terminal set to it
// reads and writes nothing, and `reset` cannot put it back.
const nNull = 27

// TestTerminalRestored (issue 13, item 7): a session that has the user's own
// terminal (run --scope, run --pty=false) turns echo off and sets the line
// discipline to N_NULL; the test sees both take effect on its terminal
// while the session runs, and then, whichever way the session ended
// (its command exited, it was stopped from outside, mosaic got SIGINT,
// SIGTERM or SIGHUP), finds the terminal as it was once mosaic returned.
func TestTerminalRestored(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	probe := probeInWorkspace(t, ws)
	for _, mode := range []string{"--scope", "--pty=false"} {
		for _, end := range []string{"exit", "stop", "SIGINT", "SIGTERM", "SIGHUP"} {
			t.Run(strings.TrimLeft(mode, "-")+"-"+end, func(t *testing.T) {
				name := sessionName(t)
				out := filepath.Join(ws, "ldisc-"+name)
				how := "wait"
				if end == "exit" {
					how = "exit"
				}
				r := startOnPTY(t, 24, 80, "run", mode, "--direct", "--name", name, "-w", ws, "--", "sh", "-c",
					`stty -echo && exec "$0" probe-ldisc "$1" "$2"`, probe, out, how)
				before, err := unix.IoctlGetInt(int(r.slave.Fd()), unix.TIOCGETD)
				if err != nil || before == nNull || r.before.Lflag&unix.ECHO == 0 {
					t.Fatalf("the test's terminal starts wrong: ldisc %d (%v), lflag %#x", before, err, r.before.Lflag)
				}
				eventually(t, 15*time.Second, "the session to set N_NULL", func() bool {
					b, _ := os.ReadFile(out)
					return strings.HasSuffix(string(b), "\n")
				})
				// The attack worked: the session turned echo off on this
				// terminal, and it is dead while the session runs (no
				// TCGETS on N_NULL either).
				if b, _ := os.ReadFile(out); string(b) != "echo-off\n" {
					t.Errorf("the session could not turn echo off (%q): the test proves nothing", b)
				}
				if end != "exit" {
					if ld, _ := unix.IoctlGetInt(int(r.slave.Fd()), unix.TIOCGETD); ld != nNull {
						t.Errorf("the session could not set N_NULL on the terminal (ldisc %d): the test proves nothing", ld)
					}
				}
				switch end {
				case "stop":
					mustMosaic(t, "stop", "--timeout", "2s", name)
				case "SIGINT", "SIGTERM", "SIGHUP":
					_ = r.cmd.Process.Signal(map[string]unix.Signal{"SIGINT": unix.SIGINT, "SIGTERM": unix.SIGTERM, "SIGHUP": unix.SIGHUP}[end])
				}
				r.wait()
				if ld, _ := unix.IoctlGetInt(int(r.slave.Fd()), unix.TIOCGETD); ld != before {
					t.Errorf("after mosaic returned, the terminal's line discipline is %d, was %d", ld, before)
				}
				if after := termios(t, r.slave); after != r.before {
					t.Errorf("after mosaic returned, the terminal's modes differ:\nbefore %+v\nafter  %+v", r.before, after)
				}
			})
		}
	}
}
