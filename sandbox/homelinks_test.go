package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHomeLinks(t *testing.T) {
	kept := t.TempDir()
	os.MkdirAll(filepath.Join(kept, ".local", "bin"), 0o700)
	os.MkdirAll(filepath.Join(kept, ".config"), 0o700)
	os.Symlink("/home/u/.claude", filepath.Join(kept, ".claude"))                      // the real one on the host
	os.Symlink("../../../../.ssh", filepath.Join(kept, ".config", "x"))                // climbs out
	os.Symlink("/usr/bin/node", filepath.Join(kept, ".local", "bin", "node"))          // the same inside and out
	os.Symlink("../share/tool/bin/tool", filepath.Join(kept, ".local", "bin", "tool")) // stays inside
	got := strings.Join(HomeLinks(kept, "/home/u", 3), "\n")
	for _, want := range []string{".claude -> /home/u/.claude", ".config/x -> ../../../../.ssh"} {
		if !strings.Contains(got, want) {
			t.Errorf("%s not listed:\n%s", want, got)
		}
	}
	if strings.Contains(got, "node") || strings.Contains(got, "tool") {
		t.Errorf("a harmless link is listed:\n%s", got)
	}
}
