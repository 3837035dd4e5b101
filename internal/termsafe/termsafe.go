// Package termsafe shows bytes a session chose (its output, a path, a
// command line) on a terminal without letting them act on it: every control
// character and invalid UTF-8 byte is written as an escape, as systemctl and
// journalctl do.
package termsafe

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Escape returns s with every control character (C0 but for the
// newline and tab when keepLines, DEL, C1) and every invalid UTF-8 byte
// written as an escape: \e for ESC, \xNN otherwise.
func Escape(s string, keepLines bool) string {
	if isPlain(s, keepLines) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == 0x1b:
			b.WriteString(`\e`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r < 0xa0:
			fmt.Fprintf(&b, `\u%04x`, r)
		case r == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func isPlain(s string, keepLines bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || c == 0x7f || c == '\\' || (c < 0x20 && !(keepLines && (c == '\n' || c == '\t'))) {
			return false
		}
	}
	return true
}
