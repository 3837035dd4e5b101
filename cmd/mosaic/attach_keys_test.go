package main

import (
	"bytes"
	"io"
	"testing"
)

// chunks reads as the given pieces, one Read each: keys as a terminal
// delivers them.
type chunks [][]byte

func (c *chunks) Read(p []byte) (int, error) {
	if len(*c) == 0 {
		return 0, io.EOF
	}
	n := copy(p, (*c)[0])
	*c = (*c)[1:]
	return n, nil
}

// TestDetachKeys: Ctrl-P Ctrl-Q ends the copy and is not sent, also split
// across reads; a Ctrl-P followed by anything else is sent as typed.
func TestDetachKeys(t *testing.T) {
	for _, tc := range []struct {
		in   [][]byte
		sent string
	}{
		{[][]byte{[]byte("ab\x10\x11cd")}, "ab"},
		{[][]byte{[]byte("ab\x10"), []byte("\x11cd")}, "ab"},
		{[][]byte{[]byte("a\x10b\x10\x10\x11")}, "a\x10b\x10"},
		{[][]byte{[]byte("\x10"), []byte("x"), []byte("\x11")}, "\x10x\x11"},
		{[][]byte{[]byte("plain")}, "plain"},
	} {
		var out bytes.Buffer
		in := chunks(tc.in)
		copyUntilDetach(&out, &in)
		if out.String() != tc.sent {
			t.Errorf("%q: sent %q, want %q", tc.in, out.String(), tc.sent)
		}
	}
}
