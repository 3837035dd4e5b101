package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
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
	links, complete := HomeLinks(kept, "/home/u", 3)
	got := strings.Join(links, "\n")
	if !complete {
		t.Error("a small home was not looked through whole")
	}
	for _, want := range []string{".claude -> /home/u/.claude", ".config/x -> ../../../../.ssh"} {
		if !strings.Contains(got, want) {
			t.Errorf("%s not listed:\n%s", want, got)
		}
	}
	if strings.Contains(got, "node") || strings.Contains(got, "tool") {
		t.Errorf("a harmless link is listed:\n%s", got)
	}
}

// TestHomeLinksBounded: a home a session filled with entries is looked
// through up to its budget of entries, and says it stopped; a link
// planted beyond the budget is not promised.
func TestHomeLinksBounded(t *testing.T) {
	defer func(b int) { homeLinksBudget = b }(homeLinksBudget)
	homeLinksBudget = 1000
	kept := t.TempDir()
	dir := filepath.Join(kept, "many")
	os.Mkdir(dir, 0o700)
	for i := 0; i < homeLinksBudget; i++ {
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("/home/u/.ssh", filepath.Join(kept, ".ssh-link"))
	links, complete := HomeLinks(kept, "/home/u", 3)
	if complete {
		t.Errorf("%d entries and more looked through whole", homeLinksBudget)
	}
	if len(links) > 1 {
		t.Errorf("links %v", links)
	}
}
