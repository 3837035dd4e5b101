package credentials

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestBrokenProfileStopsOnlyItself: a user profile that cannot be read (bad
// syntax, or a FIFO, which used to block every start forever) is refused
// when asked for by name, and only warned about otherwise.
func TestBrokenProfileStopsOnlyItself(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "bad.conf"), []byte("[Nope]\nX=1\n"), 0o600)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.conf"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if p, err := FindProfile(dir, Generic); err != nil || p.Name != Generic {
			t.Errorf("FindProfile(generic) = %v, %v: a broken unused profile stopped it", p.Name, err)
		}
		if p, err := ProfileFor(dir, []string{"claude"}); err != nil || p.Name != "claude-code" {
			t.Errorf("ProfileFor(claude) = %v, %v", p.Name, err)
		}
		if _, err := FindProfile(dir, "bad"); err == nil {
			t.Error("the broken profile itself was accepted")
		}
		if _, err := FindProfile(dir, "fifo"); err == nil {
			t.Error("a FIFO profile was accepted")
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("reading profiles blocked on a FIFO")
	}
}

// TestEnvFileFIFO: a FIFO given as --env-file is refused at once.
func TestEnvFileFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "env")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadEnvFile(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a FIFO env-file was read")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO env-file blocked")
	}
}
