package inside

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// elfHeader is the first 64 bytes of a little-endian 64-bit ELF file of
// the given machine and type.
func elfHeader(machine, kind uint16) []byte {
	h := make([]byte, 64)
	copy(h, "\x7fELF\x02\x01\x01")
	binary.LittleEndian.PutUint16(h[16:], kind)
	binary.LittleEndian.PutUint16(h[18:], machine)
	return h
}

// TestNotAProgramSaysWhatTheFileIs: each kind of file the kernel answers
// "exec format error" for is named in words, with its path.
func TestNotAProgramSaysWhatTheFileIs(t *testing.T) {
	other := uint16(183) // ARM64
	otherName := "ARM64 (aarch64)"
	if runtime.GOARCH == "arm64" {
		other, otherName = 62, "x86-64 (amd64)"
	}
	// The placeholder npm leaves when Claude Code's postinstall did not run.
	stub := "echo \"Error: claude native binary not installed.\" >&2\necho \"\" >&2\nexit 1\n"
	cases := []struct {
		label   string
		content []byte
		want    []string
	}{
		{"an installer's placeholder", []byte(stub), []string{"is a text file without a #! line, not a program", `"echo \"Error: claude native binary not installed.\" >&2"`}},
		{"text cut in a rune", append([]byte(strings.Repeat("a", 4095)), 0xc3, 0xa9), []string{"is a text file without a #! line"}},
		{"a line that would act on a terminal", []byte("\x1b]0;pwned\x07 hi\n"), []string{`"\x1b]0;pwned\a hi"`}},
		{"another architecture", elfHeader(other, 2), []string{"is a program for " + otherName + ", not for this machine"}},
		{"an unknown machine", elfHeader(4242, 2), []string{"is a program for machine 4242"}},
		{"an object file", elfHeader(thisMachine[runtime.GOARCH], 1), []string{"is an ELF file of type 1 (an object file or a core dump), not a program"}},
		{"a truncated ELF", []byte("\x7fELF\x02"), []string{"is a truncated or damaged ELF file"}},
		{"an empty file", nil, []string{"is an empty file, not a program"}},
		{"binary data", []byte{0, 1, 2, 0xff, 0xfe}, []string{"neither an ELF binary nor a script with a #! line"}},
		{"a #! line the kernel cannot use", []byte("#!" + strings.Repeat("x", 300) + "\n"), []string{"has a #! line the kernel cannot use"}},
	}
	dir := t.TempDir()
	for i, c := range cases {
		p := filepath.Join(dir, "cmd"+string(rune('a'+i)))
		if err := os.WriteFile(p, c.content, 0o755); err != nil {
			t.Fatal(err)
		}
		got := NotAProgram(p)
		for _, w := range append(c.want, p) {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q, want it to say %q", c.label, got, w)
			}
		}
		if strings.ContainsAny(got, "\x1b\x07") {
			t.Errorf("%s: %q holds a control character", c.label, got)
		}
	}
	if got := NotAProgram(filepath.Join(dir, "gone")); !strings.Contains(got, "cannot be read") {
		t.Errorf("a file that is gone: %q", got)
	}
}
