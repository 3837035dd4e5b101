package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestEscapeControls(t *testing.T) {
	for in, want := range map[string]string{
		"plain text":              "plain text",
		"\x1b]52;c;aGk=\x07":      `\e]52;c;aGk=\x07`,
		"\x1b[2J\x1b]0;title\x07": `\e[2J\e]0;title\x07`,
		"a\rb":                    `a\x0db`,
		"bad \xff byte":           `bad \xff byte`,
		"c1 \u009b31m":            `c1 \u009b31m`,
		"back\\slash":             `back\\slash`,
		"ünïcödé ok":              "ünïcödé ok",
	} {
		if got := escapeControls(in, false); got != want {
			t.Errorf("escapeControls(%q) = %q, want %q", in, got, want)
		}
	}
	if got := escapeControls("a\nb\tc\x1b", true); got != "a\nb\tc\\e" {
		t.Errorf("keepLines: %q", got)
	}
	if got := escapeControls("a\nb", false); got != `a\x0ab` {
		t.Errorf("one line: %q", got)
	}
}

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
