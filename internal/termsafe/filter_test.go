package termsafe

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// filterAll runs in through a Filter in chunks of n bytes (0: at once).
func filterAll(in string, n int) string {
	var out bytes.Buffer
	f := NewFilter(&out)
	if n == 0 {
		f.Write([]byte(in))
		return out.String()
	}
	for i := 0; i < len(in); i += n {
		f.Write([]byte(in[i:min(i+n, len(in))]))
	}
	return out.String()
}

// What draws the screen passes as it is; what acts beyond it (the
// clipboard, the title, a query whose answer the terminal types back as
// the session's text or the host's state) is dropped, the text around it
// kept; whatever the chunks the stream comes in (issue 40).
func TestFilter(t *testing.T) {
	const st = "\x1b\\"
	for _, c := range []struct{ name, in, want string }{
		// Passes: what vim, less, readline and the TUIs draw with.
		{"text", "hello, wörld ✓\r\n\ttab", "hello, wörld ✓\r\n\ttab"},
		{"sgr", "\x1b[1;38;5;208mbold\x1b[0m", "\x1b[1;38;5;208mbold\x1b[0m"},
		{"cursor", "\x1b[H\x1b[2J\x1b[10;20H\x1b[K\x1b7\x1b8\x1bM", "\x1b[H\x1b[2J\x1b[10;20H\x1b[K\x1b7\x1b8\x1bM"},
		{"alternate screen, paste, mouse, focus", "\x1b[?1049h\x1b[?2004h\x1b[?1000;1006h\x1b[?1004h\x1b[?25l", "\x1b[?1049h\x1b[?2004h\x1b[?1000;1006h\x1b[?1004h\x1b[?25l"},
		{"keypad, charset, cursor style, scroll region", "\x1b=\x1b(0q\x1b(B\x1b[2 q\x1b[1;20r", "\x1b=\x1b(0q\x1b(B\x1b[2 q\x1b[1;20r"},
		{"cursor position report asked", "\x1b[6n\x1b[?6n\x1b[5n", "\x1b[6n\x1b[?6n\x1b[5n"},
		{"device attributes 1 and 2", "\x1b[c\x1b[0c\x1b[>c", "\x1b[c\x1b[0c\x1b[>c"},
		{"mode reports, kitty keyboard", "\x1b[?2026$p\x1b[?u\x1b[>1u\x1b[<u", "\x1b[?2026$p\x1b[?u\x1b[>1u\x1b[<u"},
		{"modifyOtherKeys set", "\x1b[>4;2m", "\x1b[>4;2m"},
		{"hyperlink", "\x1b]8;;https://example.com/\x07link\x1b]8;;" + st, "\x1b]8;;https://example.com/" + st + "link\x1b]8;;" + st},
		{"colour set and reset", "\x1b]11;#000000\x07\x1b]112" + st, "\x1b]11;#000000" + st + "\x1b]112" + st},
		// Dropped.
		{"clipboard (OSC 52), BEL", "a\x1b]52;c;ZWNobyBwd25lZAo=\x07b", "ab"},
		{"clipboard, ST", "a\x1b]52;c;ZWNobyBwd25lZAo=" + st + "b", "ab"},
		{"clipboard query", "a\x1b]52;c;?\x07b", "ab"},
		{"titles", "\x1b]0;t\x07\x1b]1;t\x07\x1b]2;t" + st + "x\x1bktitle" + st, "x"},
		{"colour queries", "\x1b]11;?\x07\x1b]10;?" + st + "\x1b]4;1;?\x07\x1b]4;1;#fff;2;?\x07", ""},
		{"notifications, iTerm", "\x1b]9;hi\x07\x1b]777;notify;a;b\x07\x1b]1337;File=x:AAAA\x07\x1b]7;file:///x\x07", ""},
		{"DECRQSS", "a\x1bP$qm" + st + "b", "ab"},
		{"XTGETTCAP", "\x1bP+q544e" + st, ""},
		{"DECUDK", "\x1bP1;1|17/65636" + st, ""},
		{"APC, PM, SOS", "\x1b_Gi=1,a=q;AAAA" + st + "\x1b^pm" + st + "\x1bXsos" + st, ""},
		{"window reports and ops", "\x1b[21t\x1b[14t\x1b[18t\x1b[19t\x1b[20t\x1b[13t\x1b[11t\x1b[3;0;0t\x1b[8;1;1t\x1b[22;0t", ""},
		{"DA3, XTVERSION, DECREQTPARM", "\x1b[=c\x1b[>q\x1b[>0q\x1b[1x", ""},
		{"other status reports", "\x1b[?15n\x1b[?996n\x1b[?26n", ""},
		{"presentation, tab, locator, checksum, SGR reports", "\x1b[1$w\x1b[1$u\x1b[1'|\x1b[1;1;1;1;1;1*y\x1b[#R\x1b[1;1;1;1#|\x1b[1\"v", ""},
		{"graphics and modifier queries", "\x1b[?1;1;0S\x1b[?4m", ""},
		{"media copy", "\x1b[0i\x1b[5i", ""},
		{"ENQ, DECID", "a\x05\x1bZb", "ab"},
		{"leaving UTF-8", "\x1b%@x\x1b%G", "x"},
		// C1 controls, raw or as UTF-8, read as their ESC forms.
		{"C1 OSC raw", "a\x9d52;c;AAAA\x9cb", "ab"},
		{"C1 OSC as UTF-8", "a\xc2\x9d52;c;AAAA\xc2\x9cb", "ab"},
		{"C1 CSI passes as ESC [", "\xc2\x9b1m\x9b21t", "\x1b[1m"},
		{"C1 DCS", "\x90$qm\x9c", ""},
		{"invalid UTF-8", "a\xffb\xe2\x82c", "a\uFFFDb\uFFFDc"},
		// Ends: cancelled, cut by another ESC, too long.
		{"CAN cancels", "\x1b]52;c;AAAA\x18after", "after"},
		{"ESC cuts an OSC", "\x1b]52;c;AAAA\x1b[1mx", "\x1b[1mx"},
		{"control inside CSI acts", "\x1b[1\n2m", "\n\x1b[12m"},
		{"overlong CSI dropped", "\x1b[" + strings.Repeat("1;", 3000) + "mafter", "after"},
		{"overlong hyperlink dropped", "\x1b]8;;" + strings.Repeat("a", 5000) + "\x07after", "after"},
		{"UTF-8 inside CSI dropped", "\x1b[1\xc3\xa9mafter", "after"},
	} {
		for _, n := range []int{0, 1, 2, 3, 7} {
			if got := filterAll(c.in, n); got != c.want {
				t.Errorf("%s, in chunks of %d: %q\nwant %q", c.name, n, got, c.want)
			}
		}
	}
}

// FuzzFilter: no input panics, the state stays bounded, and what the
// filter passes passes unchanged a second time (it holds no sequence the
// filter would drop, nor half of one), however it was cut.
func FuzzFilter(f *testing.F) {
	for _, s := range []string{"\x1b]52;c;AAAA\x07", "\x1bP$qm\x1b\\", "\x1b[21t", "\x9d0;t\x9c", "\xc2\x9b6n", "\x1b[?1049h\x1b]8;;u\x07l"} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, cut uint8) {
		var out bytes.Buffer
		flt := NewFilter(&out)
		n := int(cut%16) + 1
		for i := 0; i < len(in); i += n {
			flt.Write(in[i:min(i+n, len(in))])
			if len(flt.seq) > maxSeq || len(flt.utf) > 4 {
				t.Fatalf("state grew: seq %d, utf %d", len(flt.seq), len(flt.utf))
			}
		}
		// Completed: a sequence cut at the end is not passed.
		once := out.String()
		again := filterAll(once, 0)
		if again != once {
			t.Fatalf("filtered twice differs:\n%q\n%q", once, again)
		}
		for _, bad := range []string{"\x1b]52", "\x1b]0;", "\x1b]2;", "\x1bP", "\x1b[21t", "\x05", "\x1b_", "\x1b%"} {
			if strings.Contains(once, bad) {
				t.Fatalf("%q passed: %q", bad, once)
			}
		}
	})
}

// BenchmarkFilter: a full-screen program's output (colours, cursor moves,
// text), as attach relays it.
func BenchmarkFilter(b *testing.B) {
	line := "\x1b[12;1H\x1b[38;5;208mfunc\x1b[0m main() { fmt.Println(\"héllo ✓\") }\x1b[K\r\n"
	chunk := []byte(strings.Repeat(line, 32<<10/len(line)))
	f := NewFilter(io.Discard)
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		f.Write(chunk)
	}
}

// TestBellBetweenSequences: mosaic's bell goes out at once between the
// stream's characters, and waits for a sequence split across writes to
// end (a BEL inside a CSI would end or break it).
func TestBellBetweenSequences(t *testing.T) {
	var b strings.Builder
	f := NewFilter(&b)
	f.Write([]byte("ab"))
	f.Bell()
	f.Write([]byte("\x1b[3"))
	f.Bell()
	if got := b.String(); got != "ab\a" {
		t.Fatalf("after a bell inside a sequence: %q, want it held", got)
	}
	f.Write([]byte("1mc"))
	if got := b.String(); got != "ab\a\x1b[31mc\a" {
		t.Fatalf("%q, want the held bell after the sequence", got)
	}
}
