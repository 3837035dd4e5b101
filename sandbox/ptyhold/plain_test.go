package ptyhold

import (
	"bytes"
	"testing"
)

// TestPlain: a shell's prompt with colours, a title and the clipboard set
// (OSC 52), split across writes, become text lines with none of them.
func TestPlain(t *testing.T) {
	var out bytes.Buffer
	p := &plain{out: &out}
	in := "\x1b]0;title\x07\x1b[1;32muser@host\x1b[0m:~$ ls\r\nfile\x1b]52;c;ZWNobyBoaQ==\x1b\\ one\ttwo\r\nlast"
	for i := 0; i < len(in); i += 3 {
		p.Write([]byte(in[i:min(i+3, len(in))]))
	}
	p.Flush()
	if got, want := out.String(), "user@host:~$ ls\nfile one\ttwo\nlast\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
