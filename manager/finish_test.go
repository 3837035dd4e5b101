package manager

import (
	"os"
	"path/filepath"
	"testing"

	"mosaic/manager/clone/patchcheck"
)

// A change over apply's bound is still known: its files from the finish
// step's numstat and its patch's size; a numstat missing or refused (a
// path patchcheck refuses) leaves one entry that says so, never none, and
// a patch not there counts as over the bound.
func TestOverBound(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "patch"), make([]byte, 1234), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(numstat string) {
		if err := os.WriteFile(filepath.Join(dir, "numstat"), []byte(numstat), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("3\t1\ta.txt\x00-\t-\tbig.bin\x00")
	s, size := overBound(dir)
	if size != 1234 || len(s.Files) != 2 || s.Files[0].Path != "a.txt" || s.Files[1].Path != "big.bin" {
		t.Errorf("summary %+v, size %d: want a.txt and big.bin, 1234", s.Files, size)
	}
	unlisted := []patchcheck.File{{Path: "(files not listed)", Status: "unknown"}}
	write("1\t0\t.git/config\x00")
	if s, _ := overBound(dir); len(s.Files) != 1 || s.Files[0] != unlisted[0] {
		t.Errorf("a refused numstat: %+v, want the one entry that says so", s.Files)
	}
	os.Remove(filepath.Join(dir, "numstat"))
	os.Remove(filepath.Join(dir, "patch"))
	if s, size := overBound(dir); len(s.Files) != 1 || s.Files[0] != unlisted[0] || size != patchcheck.MaxPatchBytes+1 {
		t.Errorf("nothing written: %+v, size %d", s.Files, size)
	}
}
