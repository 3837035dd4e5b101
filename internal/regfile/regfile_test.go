package regfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFIFONeverBlocks: a FIFO where a file is expected is refused at once
// (os.ReadFile would wait for a writer forever); so are a directory and, with
// noFollow, a symlink; a regular file reads whole, and a too large one is
// refused.
func TestFIFONeverBlocks(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Read(fifo, true, 1<<20); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("FIFO: %v, want a not-a-regular-file error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}
	if _, err := Read(dir, false, 1<<20); err == nil {
		t.Error("a directory was read")
	}
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("hello"), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(file, link)
	if _, err := Read(link, true, 1<<20); err == nil {
		t.Error("a symlink was followed with noFollow")
	}
	if b, err := Read(link, false, 1<<20); err != nil || string(b) != "hello" {
		t.Errorf("Read = %q, %v", b, err)
	}
	if _, err := Read(file, false, 3); err == nil {
		t.Error("a file larger than max was read")
	}
}

// WriteAtomic replaces what is at the path, a symlink included (never
// followed), with a 0600 file, and leaves no temporary file.
func TestWriteAtomicReplacesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("keep"), 0o644)
	path := filepath.Join(dir, "file")
	os.Symlink(target, path)
	if err := WriteAtomic(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the symlink's target became %q", b)
	}
	fi, err := os.Lstat(path)
	if b, _ := os.ReadFile(path); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || string(b) != "new" {
		t.Errorf("%s: %v %v %q", path, fi.Mode(), err, b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("left in the directory: %v", entries)
	}
	if err := WriteAtomic(filepath.Join(dir, "none", "file"), nil); err == nil {
		t.Error("a file in a missing directory: no error")
	}
}
