package main

import (
	"io"
	"mosaic/internal/termsafe"
	"strings"
	"unicode/utf8"
)

// A session chooses bytes that mosaic prints: its command line and
// workspace (a --may-launch session chooses both for what it launches), the
// first lines of its log in a start failure, its whole output in `mosaic
// logs`. On a terminal an escape sequence in them would act on the user's
// terminal (OSC 52 writes the clipboard, others set the title or move the
// cursor over what mosaic printed), so there every control character is
// shown escaped, as systemctl and journalctl do; --json and pipes keep the
// exact bytes.

// shellQuote quotes a command line so that it can be pasted back into a
// shell: a word of only safe characters as it is, any other in single
// quotes.
func shellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// safeWriter escapes control characters in what is written through it,
// keeping newlines and tabs; a UTF-8 sequence split across writes is held
// until it is whole.
type safeWriter struct {
	w       io.Writer
	pending []byte
}

func (s *safeWriter) Write(p []byte) (int, error) {
	buf := append(s.pending, p...)
	cut := len(buf)
	// Hold back an incomplete rune at the end (at most 3 bytes).
	for i := 1; i <= 3 && i <= len(buf); i++ {
		c := buf[len(buf)-i]
		if c < 0x80 {
			break
		}
		if c >= 0xc0 { // a lead byte: is its sequence complete?
			if !utf8.FullRune(buf[len(buf)-i:]) {
				cut = len(buf) - i
			}
			break
		}
	}
	s.pending = append([]byte{}, buf[cut:]...)
	if _, err := io.WriteString(s.w, termsafe.Escape(string(buf[:cut]), true)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what is held back, escaped.
func (s *safeWriter) Flush() error {
	if len(s.pending) == 0 {
		return nil
	}
	_, err := io.WriteString(s.w, termsafe.Escape(string(s.pending), true))
	s.pending = nil
	return err
}
