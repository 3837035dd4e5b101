package ptyhold

import "io"

// maxLine bounds one line the holder writes to the journal; a longer one
// is cut there and goes on in the next.
const maxLine = 4096

// plain turns what a session prints on its terminal into text lines for
// the journal (mosaic logs of a start --pty session): every escape
// sequence (CSI, OSC and the other strings, two-byte ESC sequences) and
// every control character but the tab is dropped, a carriage return ends
// nothing, a newline ends a line. The terminal's own bytes, with their
// colours and redraws, are the ring's, for attach; the journal gets what
// a reader can read. State carries across writes, so a sequence split
// between two reads is dropped whole.
type plain struct {
	out   io.Writer
	line  []byte
	state int
}

const (
	plainText = iota
	plainEsc  // after ESC
	plainCSI  // in ESC [ ... final byte
	plainStr  // in an OSC, DCS, APC, PM or SOS string, until BEL or ESC \
	plainStrE // ESC seen in a string
)

// Write takes what the session printed; it never fails (a line the
// journal does not take is lost, not retried).
func (p *plain) Write(b []byte) (int, error) {
	for _, c := range b {
		p.byte(c)
	}
	return len(b), nil
}

func (p *plain) byte(c byte) {
	switch p.state {
	case plainEsc:
		switch c {
		case '[':
			p.state = plainCSI
		case ']', 'P', '_', '^', 'X':
			p.state = plainStr
		default:
			p.state = plainText
		}
	case plainCSI:
		if c >= 0x40 && c <= 0x7e {
			p.state = plainText
		}
	case plainStr:
		if c == 0x07 {
			p.state = plainText
		} else if c == 0x1b {
			p.state = plainStrE
		}
	case plainStrE:
		p.state = plainStr
		if c == '\\' {
			p.state = plainText
		}
	default:
		p.text(c)
	}
}

func (p *plain) text(c byte) {
	switch {
	case c == 0x1b:
		p.state = plainEsc
	case c == '\n':
		p.Flush()
	case c == '\t' || c >= 0x20 && c != 0x7f:
		p.line = append(p.line, c)
		if len(p.line) >= maxLine {
			p.Flush()
		}
	}
}

// Flush writes the line begun, if any.
func (p *plain) Flush() {
	if len(p.line) == 0 {
		return
	}
	_, _ = p.out.Write(append(p.line, '\n'))
	p.line = p.line[:0]
}
