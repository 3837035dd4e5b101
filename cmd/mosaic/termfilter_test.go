package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// termPayload is what a hostile session prints: its clipboard (OSC 52, so
// the user's next paste into a host shell runs it), a title, and questions
// whose answers the terminal types back (DECRQSS, XTGETTCAP, the title
// report, a colour query), between text drawn in bold.
const termPayload = `printf 'A\033]52;c;ZWNobyBwd25lZAo=\007B\033P$qm\033\\C\033]2;pwned\007\033P+q544e\033\\\033[21t\033]11;?\007\033[1mVISIBLE\033[0m\n'`

// termLeaks are the payload's sequences that must not reach the user's
// terminal, each by a piece only it has.
var termLeaks = []string{"\x1b]52;", "\x1bP$q", "\x1b]2;pwned", "\x1bP+q", "\x1b[21t", "\x1b]11;?"}

// checkTerminal says whether what the user's terminal got holds the
// payload's text and drawing, and its sequences when leak.
func checkTerminal(t *testing.T, what, got string, leak bool) {
	t.Helper()
	if !strings.Contains(got, "\x1b[1mVISIBLE\x1b[0m") {
		t.Errorf("%s: the bold text did not reach the terminal:\n%q", what, got)
	}
	if !leak && !strings.Contains(got, "ABC") {
		t.Errorf("%s: the text around the sequences is lost:\n%q", what, got)
	}
	for _, s := range termLeaks {
		if strings.Contains(got, s) != leak {
			t.Errorf("%s: %q reached the terminal: %v, want %v", what, s, !leak, leak)
		}
	}
}

// Everything a session prints reaches the user's terminal through one
// filter (issue 40): with run --pty, run --pty=false and run --scope (whose
// session has the user's terminal as its stdin; stdout and stderr alike),
// and with start --pty and attach (its replay and its live output alike), the clipboard, the title and the
// questions are dropped, while the text, its colours and full-screen
// programs (vim, less) pass. The weakened build (no filter, as before)
// shows every sequence reaching the terminal first.
func TestTerminalFilter(t *testing.T) {
	needRig(t)
	for _, c := range []struct {
		name string
		bin  string
		leak bool
	}{{"weakened", weakenedMosaic(t), true}, {"mosaic", mosaicBin, false}} {
		t.Run(c.name, func(t *testing.T) {
			ws := workspace(t)
			r := startOnPTYAs(t, c.bin, 24, 80, "run", "--pty", "-w", ws, "--", "sh", "-c", termPayload)
			if code := r.wait(); code != 0 {
				t.Fatalf("run --pty: exit %d\n%q", code, r.output())
			}
			checkTerminal(t, "run --pty", r.output(), c.leak)
			// A session given the user's own terminal as its stdin: what it
			// prints comes through a pipe and the same filter.
			for _, mode := range []string{"--pty=false", "--scope"} {
				r := startOnPTYAs(t, c.bin, 24, 80, "run", mode, "--direct", "-w", ws, "--", "sh", "-c", "test -t 0 && echo stdin-terminal; "+termPayload+" >&2; "+termPayload)
				if code := r.wait(); code != 0 || !strings.Contains(r.output(), "stdin-terminal") {
					t.Fatalf("run %s: exit %d\n%q", mode, code, r.output())
				}
				checkTerminal(t, "run "+mode, r.output(), c.leak)
			}

			// start --pty: printed once before the attach (the replay), once
			// while attached (the live output).
			name := sessionName(t)
			script := termPayload + `; echo READY; while [ ! -e go ]; do sleep 0.05; done; ` + termPayload + `; echo DONE; exec sleep 60`
			if r := mosaicAs(t, c.bin, "start", "--pty", "--direct", "--name", name, "-w", ws, "--", "sh", "-c", script); r.code != 0 { // the host's "go" reaches it
				t.Fatalf("start --pty: exit %d\n%s", r.code, r.stderr)
			}
			a := startOnPTYAs(t, c.bin, 24, 80, "attach", name)
			a.waitFor("READY")
			checkTerminal(t, "attach's replay", a.output(), c.leak)
			before := len(a.output())
			writeFile(t, filepath.Join(ws, "go"), "")
			a.waitFor("DONE")
			checkTerminal(t, "attach's live output", a.output()[before:], c.leak)
			a.typeKeys("\x10\x11") // detach
			a.wait()
			mosaicAs(t, c.bin, "stop", "--timeout", "2s", name)
		})
	}
}

// tuiApp is a full-screen program as an agent's TUI is one (python3's
// curses): the alternate screen, bold text, bracketed paste and mouse
// reporting on, the keypad's keys read (an arrow arrives as curses' KEY_UP, 259), then q to leave.
const tuiApp = `import curses, sys
def main(s):
    curses.mousemask(curses.ALL_MOUSE_EVENTS)
    sys.stdout.write("\033[?2004h"); sys.stdout.flush()
    s.addstr(0, 0, open("notes.txt").readline().strip(), curses.A_BOLD)
    s.refresh()
    k = s.getch()
    s.addstr(2, 0, "got key %d" % k)
    s.refresh()
    while s.getch() != ord("q"):
        pass
curses.wrapper(main)
`

// Full-screen programs work through the filter: vim, less and a curses
// program draw the file on the alternate screen and take keys (issue 40);
// the curses one also turns on bracketed paste and mouse reporting, as
// the agents' TUIs do, and reads an arrow key. All three on both rigs.
func TestTerminalFilterFullScreen(t *testing.T) {
	needRig(t)
	for _, prog := range [][]string{{"vim", "-u", "NONE", "-N", "-n", "notes.txt"}, {"less", "notes.txt"}, {"python3", "-c", tuiApp}} {
		if _, err := os.Stat("/usr/bin/" + prog[0]); err != nil {
			// The rigs have all three (the 257 root's package list names vim
			// and less): only a machine of one's own may lack one.
			if prog[0] == "python3" || os.Getenv("MOSAIC_RIG") == "1" || os.Getenv("CI") != "" {
				t.Fatalf("no %s on this machine: the full-screen program cannot run (contrib/rig-root.sh installs it in the 257 root)", prog[0])
			}
			t.Logf("no %s on this machine", prog[0])
			continue
		}
		t.Run(prog[0], func(t *testing.T) {
			ws := workspace(t)
			writeFile(t, filepath.Join(ws, "notes.txt"), "first line of the notes\nsecond line\n")
			r := startOnPTY(t, 24, 80, append([]string{"run", "--pty", "-w", ws, "--"}, prog...)...)
			r.waitFor("first line of the notes")
			if !strings.Contains(r.output(), "\x1b[?1049h") && !strings.Contains(r.output(), "\x1b[?47h") {
				t.Errorf("%s did not switch to the alternate screen:\n%q", prog[0], r.output())
			}
			switch prog[0] {
			case "vim":
				r.typeKeys("\x1b:q!\r")
			case "less":
				r.typeKeys("q")
			default:
				r.typeKeys("\x1bOA")
				r.waitFor("got key 259")
				out := strings.NewReplacer("\x1b[?1006;1000h", "\x1b[?1000h", "\x1b[0;1m", "\x1b[1m").Replace(r.output())
				for _, s := range []string{"\x1b[?2004h", "\x1b[?1000h", "\x1b[1m"} {
					if !strings.Contains(out, s) {
						t.Errorf("the curses program's %q did not reach the terminal:\n%q", s, r.output())
					}
				}
				r.typeKeys("q")
			}
			if code := r.wait(); code != 0 {
				t.Errorf("%s: exit %d\n%q", prog[0], code, r.output())
			}
		})
	}
}
