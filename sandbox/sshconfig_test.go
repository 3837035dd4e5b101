package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSSHConfigCopy: a directory of the user's own files needs no copy; one
// with a file of another owner is copied byte for byte, as the user's,
// with its mode, once per content; a missing directory is nothing. (Run
// as root, root's files are the user's own: the owner case is shown by
// pretending to be another uid.)
func TestSSHConfigCopy(t *testing.T) {
	src, runtime := t.TempDir(), t.TempDir()
	dir := filepath.Join(runtime, "ssh-config")
	if err := os.WriteFile(filepath.Join(src, "20-systemd-ssh-proxy.conf"), []byte("Host .host\n\tProxyCommand none\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "30-loose.conf"), []byte("# group-writable\n"), 0o664); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "30-loose.conf"), 0o664); err != nil { // (past the umask)
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "sub.conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	me := os.Getuid()
	if got, err := SSHConfigCopy(src, dir, me); err != nil || got != "" {
		t.Fatalf("the user's own files were copied: %q, %v", got, err)
	}
	if got, err := SSHConfigCopy(filepath.Join(src, "none"), dir, me+1); err != nil || got != "" {
		t.Fatalf("a missing directory: %q, %v", got, err)
	}
	got, err := SSHConfigCopy(src, dir, me+1) // the files are another's to this uid
	if err != nil || got == "" {
		t.Fatalf("another's files were not copied: %q, %v", got, err)
	}
	b, err := os.ReadFile(filepath.Join(got, "20-systemd-ssh-proxy.conf"))
	if err != nil || string(b) != "Host .host\n\tProxyCommand none\n" {
		t.Fatalf("the copy: %q, %v", b, err)
	}
	// A file of root keeps its mode (the group-writable one is refused
	// inside as on the host); one of neither root nor the (pretended) user
	// is refused by the host's ssh, so is writable by others in the copy,
	// which ssh refuses too.
	for name, perm := range map[string]os.FileMode{"20-systemd-ssh-proxy.conf": 0o644, "30-loose.conf": 0o664} {
		want := perm
		if me != 0 {
			want |= 0o022
		}
		fi, err := os.Stat(filepath.Join(got, name))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v (%v)", name, fi.Mode().Perm(), want, err)
		}
	}
	if _, err := os.Stat(filepath.Join(got, "sub.conf")); err == nil {
		t.Error("a directory was copied")
	}
	if again, err := SSHConfigCopy(src, dir, me+1); err != nil || again != got {
		t.Errorf("the same content copied anew: %q, %v", again, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d entries in the copies' directory (a temporary one left?)", len(entries))
	}
}
