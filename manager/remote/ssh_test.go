package remote

import (
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"

	"mosaic/internal/errcode"
)

// TestStderrTailMarkers: a marker line counts only as the stream's last
// line (the remote stage's own, written just before it exits); one with a
// line after it, as a session prints it, is passed on as output and
// counts for nothing.
func TestStderrTailMarkers(t *testing.T) {
	for _, tc := range []struct {
		in               string
		missing, exited  bool
		version, written string
	}{
		{in: "mosaic-remote: no mosaic on this host (looked)\n", missing: true},
		{in: "out\nmosaic-remote: exit 3\n", exited: true, written: "out\n"},
		{in: "mosaic-remote: protocol 9, this mosaic speaks 1\n", version: "protocol 9, this mosaic speaks 1"},
		{in: "mosaic-remote: no mosaic on this host\nafter\nmosaic-remote: exit 3\n", exited: true, written: "mosaic-remote: no mosaic on this host\nafter\n"},
		{in: "mosaic-remote: protocol 9\nmosaic-remote: exit 0\n", exited: true, written: "mosaic-remote: protocol 9\n"},
		{in: "mosaic-remote: exit 0\nlost\n", written: "mosaic-remote: exit 0\nlost\n"},
	} {
		var b strings.Builder
		d := &stderrTail{w: &b}
		d.Write([]byte(tc.in))
		d.flush()
		if d.missing != tc.missing || d.exited != tc.exited || d.version != tc.version || b.String() != tc.written {
			t.Errorf("%q: missing %v exited %v version %q written %q; want %v %v %q %q", tc.in, d.missing, d.exited, d.version, b.String(), tc.missing, tc.exited, tc.version, tc.written)
		}
	}
}

// TestExitOfSays: a lost connection's message claims only what is known
// of the host (issue 40): an interrupted start may or may not have left a
// session, a run's is stopped by the hang-up; and a program that exits
// without mosaic's last line (another program of that name) is
// remote-no-mosaic, not its exit code passed on as the command's.
func TestExitOfSays(t *testing.T) {
	killed := exec.Command("sh", "-c", "kill -9 $$").Run()
	exited64 := exec.Command("sh", "-c", "exit 64").Run()
	lost := exec.Command("sh", "-c", "exit 255").Run()
	tgt, _ := ParseTarget("box")
	for _, tc := range []struct {
		cmd      string
		err      error
		tty      bool
		tail     string
		code     string
		want     string
		notWant  string
		wantExit int
	}{
		{cmd: "start", err: killed, code: "remote-unreachable", want: "whether the session was started there is not known", notWant: "runs on"},
		{cmd: "start", err: lost, code: "remote-unreachable", want: "not known", notWant: "runs on"},
		{cmd: "run", err: killed, tty: true, code: "remote-unreachable", want: "the hang-up stops the session"},
		{cmd: "attach", err: lost, tty: true, code: "remote-unreachable", want: "runs on"},
		{cmd: "list", err: exited64, tail: "usage: mosaic FILE\n", code: "remote-no-mosaic", want: "another program"},
		{cmd: "list", err: nil, code: "remote-no-mosaic", want: "another program"},
		{cmd: "list", err: exited64, tail: "mosaic-remote: exit 64\n", wantExit: 64},
		{cmd: "run", err: exited64, tty: true, wantExit: 64},
	} {
		d := &stderrTail{w: io.Discard}
		d.Write([]byte(tc.tail))
		d.flush()
		code, err := sshCall{ctx: context.Background(), t: tgt, cmd: tc.cmd}.exitOf(tc.err, d, tc.tty)
		if tc.code == "" {
			if err != nil || code != tc.wantExit {
				t.Errorf("%s %v: %d %v; want exit %d", tc.cmd, tc.err, code, err, tc.wantExit)
			}
			continue
		}
		e := errcode.Of(err)
		if err == nil || e.Code != tc.code || !strings.Contains(e.Message, tc.want) || tc.notWant != "" && strings.Contains(e.Message, tc.notWant) {
			t.Errorf("%s %v: %v; want %s saying %q", tc.cmd, tc.err, err, tc.code, tc.want)
		}
	}
}
