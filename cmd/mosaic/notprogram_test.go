package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCommandThatIsNotAProgram: a session's command the kernel cannot
// execute (npm's placeholder for a CLI whose postinstall did not run, a
// program of another architecture) is named in words with its path, in a
// service (run, start) and in a scope, not as "exec format error".
func TestCommandThatIsNotAProgram(t *testing.T) {
	needRig(t)
	t.Parallel()
	ws := workspace(t)
	stub := filepath.Join(ws, "claude.exe")
	if err := os.WriteFile(stub, []byte("echo \"Error: claude native binary not installed.\" >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// An ELF header of the other common architecture.
	machine, arch := uint16(183), "ARM64"
	if runtime.GOARCH == "arm64" {
		machine, arch = 62, "x86-64"
	}
	elf := make([]byte, 64)
	copy(elf, "\x7fELF\x02\x01\x01")
	binary.LittleEndian.PutUint16(elf[16:], 2)
	binary.LittleEndian.PutUint16(elf[18:], machine)
	foreign := filepath.Join(ws, "foreign")
	if err := os.WriteFile(foreign, elf, 0o755); err != nil {
		t.Fatal(err)
	}
	textWant := stub + " is a text file without a #! line, not a program"
	cases := []struct {
		label string
		args  []string
		want  string
	}{
		{"run, the placeholder", []string{"run", "--pty=false", "-w", ws, "--", stub, "--version"}, textWant},
		{"run --scope, the placeholder", []string{"run", "--scope", "--direct", "--pty=false", "-w", ws, "--", stub}, textWant},
		{"run, another architecture", []string{"run", "--pty=false", "-w", ws, "--", foreign}, foreign + " is a program for " + arch},
		{"start, the placeholder", []string{"start", "--name", sessionName(t), "-w", ws, "--", stub}, textWant},
	}
	for _, c := range cases {
		r := mosaic(t, c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "exec format error") {
			t.Errorf("%s: exit %d, stderr %q; want a failure saying %q", c.label, r.code, r.stderr, c.want)
		}
	}
}
