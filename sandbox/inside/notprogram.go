package inside

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// elfMachines names the e_machine values of the architectures Go builds for.
var elfMachines = map[uint16]string{
	3: "x86 (386)", 8: "MIPS", 20: "PowerPC", 21: "PowerPC 64", 22: "s390",
	40: "ARM (32-bit)", 62: "x86-64 (amd64)", 183: "ARM64 (aarch64)",
	243: "RISC-V", 258: "LoongArch",
}

// thisMachine is the e_machine of the architecture mosaic runs on.
var thisMachine = map[string]uint16{
	"386": 3, "amd64": 62, "arm": 40, "arm64": 183, "riscv64": 243,
	"ppc64": 21, "ppc64le": 21, "s390x": 22, "loong64": 258,
	"mips": 8, "mipsle": 8, "mips64": 8, "mips64le": 8,
}

// NotAProgram says in words what the file at path is, for an exec that
// failed with ENOEXEC (the kernel's "exec format error"): a text file
// without a #! line (an installer's placeholder is one), a program of
// another architecture, an empty file. Its first 4 KiB are read; the file
// is the session's, so what it quotes of it is escaped.
func NotAProgram(path string) string {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Sprintf("%s is not a program the kernel can run (exec format error), and it cannot be read: %v", path, err)
	}
	defer f.Close()
	head := make([]byte, 4096)
	n, _ := f.Read(head)
	return describeHead(path, head[:max(n, 0)])
}

// describeHead is NotAProgram for the file's first bytes.
func describeHead(path string, head []byte) string {
	switch {
	case len(head) == 0:
		return fmt.Sprintf("%s is an empty file, not a program", path)
	case bytes.HasPrefix(head, []byte("\x7fELF")):
		return describeELF(path, head)
	case bytes.HasPrefix(head, []byte("#!")):
		return fmt.Sprintf("%s has a #! line the kernel cannot use (longer than it reads, or naming no interpreter): %s", path, quotedFirstLine(head))
	case isText(head):
		return fmt.Sprintf("%s is a text file without a #! line, not a program (a placeholder? its first line: %s)", path, quotedFirstLine(head))
	}
	return fmt.Sprintf("%s is not a program the kernel can run: neither an ELF binary nor a script with a #! line", path)
}

// describeELF says why the kernel would not run an ELF file.
func describeELF(path string, head []byte) string {
	if len(head) < 20 || (head[5] != 1 && head[5] != 2) {
		return fmt.Sprintf("%s is a truncated or damaged ELF file, not a program", path)
	}
	var order binary.ByteOrder = binary.LittleEndian
	if head[5] == 2 {
		order = binary.BigEndian
	}
	machine := order.Uint16(head[18:20])
	here := elfMachines[thisMachine[runtime.GOARCH]]
	if machine != thisMachine[runtime.GOARCH] {
		name, ok := elfMachines[machine]
		if !ok {
			name = fmt.Sprintf("machine %d", machine)
		}
		return fmt.Sprintf("%s is a program for %s, not for this machine (%s)", path, name, here)
	}
	if kind := order.Uint16(head[16:18]); kind != 2 && kind != 3 { // ET_EXEC, ET_DYN
		return fmt.Sprintf("%s is an ELF file of type %d (an object file or a core dump), not a program", path, kind)
	}
	return fmt.Sprintf("%s is an ELF program for this machine (%s) that the kernel refused (exec format error): its header is damaged or of another class", path, here)
}

// isText tells whether head is UTF-8 without NUL bytes (its last rune may
// be cut where the read stopped).
func isText(head []byte) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return false
	}
	for i := 0; i < utf8.UTFMax && len(head) > 0 && !utf8.Valid(head); i++ {
		head = head[:len(head)-1]
	}
	return utf8.Valid(head)
}

// quotedFirstLine quotes the first line of head, at most 100 bytes, escaped.
func quotedFirstLine(head []byte) string {
	line, _, _ := bytes.Cut(head, []byte("\n"))
	if len(line) > 100 {
		line = append(line[:100:100], "..."...)
	}
	return fmt.Sprintf("%q", line)
}
