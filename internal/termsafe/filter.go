package termsafe

import (
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Filter is what a session prints on its terminal on the way to the user's
// (attach, run --pty, --host): unlike Escape, what draws the screen passes
// as it is, so that full-screen programs (vim, less, readline, the agents'
// TUIs) work: text, colours, cursor movement and modes, the alternate
// screen, bracketed paste, mouse and keyboard modes, hyperlinks. What would
// act on the user's machine beyond that terminal's screen is dropped:
//
//   - OSC 52 (sets the host's clipboard: the user's next paste into a host
//     shell runs it), titles (OSC 0/1/2, screen's ESC k), notifications
//     and every OSC not on a short list of drawing ones, and any OSC query;
//   - every DCS, SOS, PM and APC string (DECRQSS and XTGETTCAP, which the
//     terminal answers echoing what was asked; DECUDK, which redefines
//     keys; kitty's graphics queries);
//   - the requests whose answer is text the session chose or the host's
//     state (window ops and reports CSI ... t: the title report types the
//     title back; DA3, XTVERSION, DECRQPSR, DECRQTSR, locator reports,
//     modifyOtherKeys and graphics queries, media copy), ENQ (answerback),
//     DECID (ESC Z), and ESC % (leaving UTF-8, after which this filter's
//     reading of C1 bytes would no longer be the terminal's).
//
// A terminal types its answers as input, which reaches the session through
// the same attach; one the user's shell reads (the session has ended, or
// the user detached, before it arrived) is typed there. So the queries
// kept are only those whose answer is digits and fixed characters, never
// text the session chose, and no newline, so that typed into a shell it
// runs nothing, and which programs wait for: the cursor position report
// (DSR 6, readline-like line editors and TUIs measure the screen by it),
// device status (DSR 5), primary and secondary device attributes (DA1/DA2:
// vim reads the version; crossterm, under Codex, sends DA1 after its other
// queries and waits for it, two seconds at every start without it), mode
// reports (DECRQM) and kitty's keyboard-flags query.
//
// The filter reads a stream: a sequence split across writes is whole when
// its end arrives, and its state is bounded (a sequence longer than
// maxSeq is dropped whole, whatever it was). C1 controls (0x9b for ESC [,
// as raw bytes or as the UTF-8 of U+009B) are read as their ESC forms;
// bytes that are not UTF-8 become U+FFFD, so that no byte reaches the
// terminal that it could read as a control this filter did not.
type Filter struct {
	mu    sync.Mutex // Write and Bell may come from two goroutines
	bell  bool       // a Bell waits for the end of a sequence
	w     io.Writer
	state int
	seq   []byte // the sequence read so far (ESC ... ), at most maxSeq
	over  bool   // seq overflowed: drop the sequence when it ends
	utf   []byte // an incomplete UTF-8 character of the text
	out   []byte
}

// maxSeq bounds a sequence the filter holds before it decides: the longest
// CSI and the OSC hyperlinks (URLs) it passes fit.
const maxSeq = 4096

const (
	ground    = iota
	esc       // after ESC
	escInter  // ESC and intermediates (ESC ( B)
	csi       // ESC [ ...
	str       // OSC, DCS, SOS, PM, APC, ESC k: until ST (or BEL for OSC)
	strEsc    // ESC inside a string: ST if '\' follows
	dropUntil // a string being dropped whole (not held)
	dropEsc
)

// NewFilter returns a Filter writing to w.
func NewFilter(w io.Writer) *Filter {
	return &Filter{w: w}
}

// Write filters p; a sequence it ends within waits for the next Write.
func (f *Filter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if weakened {
		return f.w.Write(p)
	}
	f.out = f.out[:0]
	for i := 0; i < len(p); i++ {
		if f.state == ground && len(f.utf) == 0 {
			// Plain text passes in one piece: what most of a screen is.
			j := i
			for j < len(p) && (p[j] >= 0x20 && p[j] < 0x7f || p[j] == '\n' || p[j] == '\r') {
				j++
			}
			if j > i {
				f.out = append(f.out, p[i:j]...)
				if i = j; i == len(p) {
					break
				}
			}
		}
		f.byte(p[i])
	}
	if f.bell && f.state == ground && len(f.utf) == 0 {
		f.out, f.bell = append(f.out, 7), false
	}
	if len(f.out) > 0 {
		if _, err := f.w.Write(f.out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Bell rings the terminal's bell (BEL) of mosaic's own, between two of
// the stream's characters or sequences: at once when the stream is there,
// else at the end of the Write that gets it there. A BEL moves nothing on
// the screen, so a full-screen program's drawing is not broken by it.
func (f *Filter) Bell() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state != ground || len(f.utf) > 0 {
		f.bell = true
		return
	}
	_, _ = f.w.Write([]byte{7})
}

// byte takes one byte of the stream.
func (f *Filter) byte(b byte) {
	if f.state == ground && (len(f.utf) > 0 || b >= 0x80) {
		f.text(b)
		return
	}
	if b >= 0x80 && b < 0xa0 && f.state != str && f.state != dropUntil && f.state != strEsc && f.state != dropEsc {
		f.c1(b) // a raw C1 control in a sequence ends it and starts its own
		return
	}
	f.ascii(b)
}

// text takes a byte of UTF-8 text in the ground state: a whole character
// passes, one that is U+0080-U+009F is the C1 control it names, one that
// is not UTF-8 is U+FFFD.
func (f *Filter) text(b byte) {
	if len(f.utf) == 0 && b >= 0x80 && b < 0xc0 {
		if b < 0xa0 {
			f.c1(b)
		} else {
			f.out = append(f.out, "\uFFFD"...)
		}
		return
	}
	if len(f.utf) > 0 && (b < 0x80 || b >= 0xc0) {
		// The character before was cut short.
		f.utf = f.utf[:0]
		f.out = append(f.out, "\uFFFD"...)
		f.byte(b)
		return
	}
	f.utf = append(f.utf, b)
	if !utf8.FullRune(f.utf) {
		return
	}
	r, n := utf8.DecodeRune(f.utf)
	switch {
	case r == utf8.RuneError && n <= 1:
		f.out = append(f.out, "\uFFFD"...)
		rest := append([]byte{}, f.utf[1:]...)
		f.utf = f.utf[:0]
		for _, c := range rest {
			f.byte(c)
		}
		return
	case r >= 0x80 && r < 0xa0:
		f.utf = f.utf[:0]
		f.c1(byte(r))
		return
	}
	f.out = append(f.out, f.utf...)
	f.utf = f.utf[:0]
}

// c1 reads a C1 control as ESC and its 7-bit final.
func (f *Filter) c1(b byte) {
	f.ascii(0x1b)
	f.ascii(b - 0x40)
}

// ascii takes one 7-bit byte (or a byte of a string's contents).
func (f *Filter) ascii(b byte) {
	switch f.state {
	case ground:
		switch b {
		case 0x1b:
			f.begin(esc, b)
		case 0x05: // ENQ: the terminal answers with its answerback
		default:
			f.out = append(f.out, b)
		}
	case esc:
		f.afterEsc(b)
	case escInter:
		switch {
		case b >= 0x20 && b <= 0x2f:
			f.hold(b)
		case b >= 0x30 && b <= 0x7e:
			f.hold(b)
			if f.seq[1] != '%' && !f.over { // ESC % leaves UTF-8
				f.out = append(f.out, f.seq...)
			}
			f.state = ground
		default:
			f.control(b)
		}
	case csi:
		switch {
		case b >= 0x40 && b <= 0x7e:
			f.hold(b)
			if !f.over && csiPasses(f.seq[2:]) {
				f.out = append(f.out, f.seq...)
			}
			f.state = ground
		case b >= 0x20 && b <= 0x3f:
			f.hold(b)
		default:
			f.control(b)
		}
	case str, strEsc:
		f.inString(b)
	case dropUntil, dropEsc:
		f.dropping(b)
	}
}

// afterEsc takes the byte after ESC.
func (f *Filter) afterEsc(b byte) {
	switch {
	case b == '[':
		f.hold(b)
		f.state = csi
	case b == ']':
		f.hold(b)
		f.state = str
	case b == 'P' || b == 'X' || b == '^' || b == '_' || b == 'k':
		f.state = dropUntil // DCS, SOS, PM, APC, screen's title
	case b >= 0x20 && b <= 0x2f:
		f.hold(b)
		f.state = escInter
	case b == 'Z': // DECID: the terminal answers as to DA
		f.state = ground
	case b >= 0x30 && b <= 0x7e:
		f.out = append(f.out, 0x1b, b)
		f.state = ground
	default:
		f.control(b)
	}
}

// control is a C0 control (or DEL) within an escape or control sequence:
// ESC starts another, CAN and SUB cancel it, any other acts at once (as a
// terminal does) while the sequence goes on.
func (f *Filter) control(b byte) {
	switch b {
	case 0x1b:
		f.begin(esc, b)
	case 0x18, 0x1a:
		f.state = ground
	case 0x05:
	default:
		if b < 0x20 || b == 0x7f {
			f.out = append(f.out, b)
		} else {
			f.over = true // a byte no sequence holds (UTF-8 in a CSI): the sequence is dropped
		}
	}
}

// inString takes a byte of an OSC the filter holds until its end.
func (f *Filter) inString(b byte) {
	if f.state == strEsc {
		if b == '\\' {
			f.endOSC()
			return
		}
		f.state = ground // ESC ended the string unfinished: dropped
		f.begin(esc, 0x1b)
		f.ascii(b)
		return
	}
	switch {
	case b == 0x07:
		f.endOSC()
	case b == 0x1b:
		f.state = strEsc
	case b == 0x9c:
		f.endOSC()
	case b == 0x18 || b == 0x1a:
		f.state = ground
	default:
		f.hold(b)
	}
}

// dropping takes a byte of a string dropped whole, until its ST (or BEL,
// CAN, SUB, which end one in a terminal too).
func (f *Filter) dropping(b byte) {
	if f.state == dropEsc {
		f.state = ground
		if b != '\\' {
			f.begin(esc, 0x1b)
			f.ascii(b)
		}
		return
	}
	switch b {
	case 0x1b:
		f.state = dropEsc
	case 0x07, 0x9c, 0x18, 0x1a:
		f.state = ground
	}
}

// endOSC ends the OSC held and passes it if oscPasses, with ST.
func (f *Filter) endOSC() {
	f.state = ground
	if f.over || !oscPasses(string(f.seq[2:])) {
		return
	}
	f.out = append(f.out, f.seq...)
	f.out = append(f.out, 0x1b, '\\')
}

// begin starts holding a sequence.
func (f *Filter) begin(state int, b byte) {
	f.state = state
	f.seq = append(f.seq[:0], b)
	f.over = false
}

// hold adds b to the sequence held, up to maxSeq.
func (f *Filter) hold(b byte) {
	if len(f.seq) >= maxSeq {
		f.over = true
		return
	}
	f.seq = append(f.seq, b)
}

// oscPasses says whether an OSC (its text between ESC ] and the end) only
// draws: a hyperlink (8), a colour set or reset (4, 10-19, 104, 110-119),
// a shell's prompt marks (133), and never a query ("?" for a value).
func oscPasses(body string) bool {
	num, rest, _ := strings.Cut(body, ";")
	n, err := strconv.Atoi(num)
	if err != nil || len(num) > 4 {
		return false
	}
	if !utf8.ValidString(body) || strings.ContainsFunc(body, func(r rune) bool { return r < 0x20 || r >= 0x7f && r < 0xa0 }) {
		return false
	}
	switch {
	case n == 8, n == 133:
		return true
	case n == 4, n >= 10 && n <= 19, n == 104, n >= 110 && n <= 119:
		for _, field := range strings.Split(rest, ";") {
			if strings.HasPrefix(field, "?") {
				return false
			}
		}
		return true
	}
	return false
}

// csiPasses says whether a control sequence (its bytes after ESC [) passes:
// all but those that ask the terminal for an answer of text the session
// chose or the host's state, or act on the user's window (Filter's
// comment).
func csiPasses(seq []byte) bool {
	final := seq[len(seq)-1]
	body := string(seq[:len(seq)-1])
	var prefix, inter string
	if body != "" && strings.ContainsRune("<=>?", rune(body[0])) {
		prefix, body = body[:1], body[1:]
	}
	if i := strings.IndexFunc(body, func(r rune) bool { return r >= 0x20 && r <= 0x2f }); i >= 0 {
		body, inter = body[:i], body[i:]
	}
	params := body
	switch {
	case inter == "'" || strings.Contains(inter, "'"):
		return false // the locator's reports and modes
	case final == 't', final == 'i', final == 'x' && inter == "":
		return false // window ops and reports, media copy, DECREQTPARM
	case final == 'n':
		return inter == "" && (prefix == "" && (params == "5" || params == "6") || prefix == "?" && params == "6")
	case final == 'c':
		return inter == "" && (prefix == "" || prefix == ">") && (params == "" || params == "0")
	case final == 'p' && inter == "$":
		return true // DECRQM: a mode's number and state
	case final == 'u' && prefix == "?":
		return params == "" && inter == "" // kitty's keyboard flags
	case final == 'y' && (inter == "" || inter == "*"):
		return false // DECTST, DECRQCRA
	case inter == "$" && (final == 'w' || final == 'u'):
		return false // DECRQPSR, DECRQTSR
	case inter == "#" && (final == '|' || final == 'R'):
		return false // XTREPORTSGR, XTQPUSHSGR-style reports
	case inter == "\"" && final == 'v':
		return false // DECRQDE
	case prefix == ">" && (final == 'q' || final == 'T' || final == 't'):
		return false // XTVERSION, title modes
	case prefix == "?" && (final == 'S' || final == 'm'):
		return false // XTSMGRAPHICS, XTQMODKEYS
	}
	return true
}
