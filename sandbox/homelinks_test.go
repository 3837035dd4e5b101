package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHomeLinks (issue 31, breaks 4 and 5): every symlink of a kept home
// whose resolution on the host leaves it is named, at any depth: an
// absolute one, one that climbs out, a magic link (/proc/self/root/...,
// whose text names no home), and one that stays inside until a link
// deeper down climbs out. Each is first shown to lead a write out.
func TestHomeLinks(t *testing.T) {
	kept, real := t.TempDir(), t.TempDir()
	climb := strings.Repeat("../", strings.Count(kept, "/")+8) // to / from any of them
	os.MkdirAll(filepath.Join(kept, ".local", "bin"), 0o700)
	os.MkdirAll(filepath.Join(kept, ".config"), 0o700)
	os.MkdirAll(filepath.Join(kept, "a", "b", "c", "x", "y", "z"), 0o700)
	os.MkdirAll(filepath.Join(kept, ".local", "share", "tool", "bin"), 0o700)
	out := map[string]string{
		".claude":         real,                                  // absolute
		".config/x":       climb + strings.TrimPrefix(real, "/"), // climbs out
		".magic":          "/proc/self/root" + real,              // a magic link's path
		".deep":           "a/b/c/d",                             // inside, until d
		"a/b/c/d":         climb + strings.TrimPrefix(real, "/"),
		"a/b/c/x/y/z/far": real, // below any fixed depth
		".local/bin/node": "/usr/bin/node",
	}
	for rel, target := range out {
		os.Symlink(target, filepath.Join(kept, rel))
	}
	// Shown: a write through each lands outside the kept home.
	for rel := range out {
		if rel == ".local/bin/node" {
			continue
		}
		os.Remove(filepath.Join(real, "probe"))
		if err := os.WriteFile(filepath.Join(kept, rel, "probe"), nil, 0o600); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if _, err := os.Stat(filepath.Join(real, "probe")); err != nil {
			t.Fatalf("a write through %s did not land outside, so this test proves nothing", rel)
		}
	}
	inside := map[string]string{
		".local/bin/tool": "../share/tool/bin/tool", // stays inside
		".dangling":       "missing/file",           // a write makes it inside
		".loopless":       ".local/bin",
	}
	for rel, target := range inside {
		os.Symlink(target, filepath.Join(kept, rel))
	}
	links, complete := HomeLinks(kept)
	got := strings.Join(links, "\n")
	if !complete {
		t.Error("a small home was not looked through whole")
	}
	for rel, target := range out {
		if !strings.Contains(got, filepath.Join(kept, rel)+" -> "+target) {
			t.Errorf("%s -> %s not named:\n%s", rel, target, got)
		}
	}
	if !strings.Contains(got, "(on the host: "+real+")") {
		t.Errorf("where a link lands on the host is not said:\n%s", got)
	}
	for rel := range inside {
		if strings.Contains(got, filepath.Join(kept, rel)+" ->") {
			t.Errorf("%s, which stays inside, is named:\n%s", rel, got)
		}
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
	links, complete := HomeLinks(kept)
	if complete {
		t.Errorf("%d entries and more looked through whole", homeLinksBudget)
	}
	if len(links) > 1 {
		t.Errorf("links %v", links)
	}
}
