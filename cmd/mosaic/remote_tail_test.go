package main

import (
	"strings"
	"testing"
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
