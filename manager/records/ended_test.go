package records

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// endedOutput runs the session-ended stage for a record whose workspace
// holds a submodule link the session planted at path sub (in the index it
// wrote), and returns what the stage wrote to its stderr: for mosaic run,
// the user's terminal.
func endedOutput(t *testing.T, output, sub string) []byte {
	t.Helper()
	ws := t.TempDir()
	start := time.Now()
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, sub), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, sub, ".git"), []byte("gitdir: /x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	idx := []byte("DIRC")
	idx = binary.BigEndian.AppendUint32(idx, 2)
	idx = binary.BigEndian.AppendUint32(idx, 1)
	var e [62]byte
	binary.BigEndian.PutUint32(e[24:28], 0o160000)
	idx = append(append(idx, e[:]...), sub...)
	idx = append(idx, make([]byte, 8-(62+len(sub))%8)...)
	idx = append(idx, make([]byte, 20)...) // the checksum git writes last
	if err := os.WriteFile(filepath.Join(ws, ".git", "index"), idx, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := Write(dir, Record{Name: "x", Description: Description{Command: []string{"true"}, Workspace: ws, Output: output}, Started: start}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = f
	err = RecordEnd(dir, func(string) string { return "" }, "")
	os.Stderr = saved
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := ReadEnd(dir); !ok || len(e.MovedAside) != 1 || e.MovedAside[0].To == "" {
		t.Fatalf("end %+v", e)
	}
	out, _ := os.ReadFile(f.Name())
	return out
}

// TestEndedStageOutput: the ended stage's stderr is the session's, which
// for mosaic run is the user's terminal. It wrote each moved entry's line
// there raw, with the submodule path the session chose (terminal escapes,
// a newline to forge lines) and again beside run's own escaped line. Now
// it says them in the journal only (mosaic start), escaped.
func TestEndedStageOutput(t *testing.T) {
	sub := "s\x1b]0;owned\x07\x1b[2J\nmosaic: all is well"
	if out := endedOutput(t, "journal", sub); bytes.ContainsAny(out, "\x1b\x07") || bytes.Count(out, []byte("\n")) != 1 || !bytes.Contains(out, []byte(`\e]0;owned`)) {
		t.Errorf("the journal got %q", out)
	}
	if out := endedOutput(t, "terminal", sub); len(out) != 0 {
		t.Errorf("the terminal of mosaic run got %q from the ended stage", out)
	}
}
