package termsafe

import "testing"

// TestEscape: escape sequences, CR, invalid bytes, C1 and backslashes are
// written as escapes; newline and tab only with keepLines.
func TestEscape(t *testing.T) {
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
		if got := Escape(in, false); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Escape("a\nb\tc\x1b", true); got != "a\nb\tc\\e" {
		t.Errorf("keepLines: %q", got)
	}
	if got := Escape("a\nb", false); got != `a\x0ab` {
		t.Errorf("one line: %q", got)
	}
}
