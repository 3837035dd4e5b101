package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestSafeWriterHoldsSplitRunes(t *testing.T) {
	var out bytes.Buffer
	w := &safeWriter{w: &out}
	in := "é\x1b[31m€"
	for i := 0; i < len(in); i++ { // one byte at a time
		w.Write([]byte{in[i]})
	}
	w.Flush()
	if out.String() != `é\e[31m€` {
		t.Errorf("got %q", out.String())
	}
}

func TestShellQuote(t *testing.T) {
	got := shellQuote([]string{"sh", "-c", "echo 'hi' $HOME", "", "a=b"})
	if got != `sh -c 'echo '\''hi'\'' $HOME' '' a=b` {
		t.Errorf("got %s", got)
	}
	if strings.Contains(shellQuote([]string{"\x1b[2J"}), "\x1b[2J") == false {
		t.Error("shellQuote is not the escaper: escaping is separate")
	}
}
