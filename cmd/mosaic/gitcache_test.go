package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGitIdentityCache: a start takes the user's git settings from the
// cache while the files git read are unchanged (the cache is not written
// again), and a change to one of them, an include target made after the
// cache was, or the config itself, reaches the very next session. Not
// parallel: another test's settings would replace the one cache.
func TestGitIdentityCache(t *testing.T) {
	needRig(t)
	cfg := t.TempDir()
	writeFile(t, filepath.Join(cfg, "git", "config"), "[user]\n\tname = Ann\n[include]\n\tpath = more\n")
	env := []string{"XDG_CONFIG_HOME=" + cfg}
	cache := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "mosaic", "git-settings")
	time.Sleep(3100 * time.Millisecond) // older than a cache may trust (gitCacheSettle)
	ws := workspace(t)
	run := func(what, want string) {
		t.Helper()
		r := mosaicWith(t, env, "", "run", "-w", ws, "--", "sh", "-c", "git config --global --list")
		if r.code != 0 || r.stdout != want {
			t.Fatalf("%s: exit %d, stdout %q, want %q, stderr %s", what, r.code, r.stdout, want, r.stderr)
		}
	}
	run("first start", "user.name=Ann\n")
	b, err := os.ReadFile(cache)
	if err != nil || !strings.Contains(string(b), strconv.Quote(filepath.Join(cfg, "git", "config"))) {
		t.Fatalf("the cache %s: %v\n%s", cache, err, b)
	}
	before, _ := os.Stat(cache)
	run("nothing changed", "user.name=Ann\n")
	if after, _ := os.Stat(cache); !after.ModTime().Equal(before.ModTime()) {
		t.Error("a start with nothing changed wrote the cache again: it ran git")
	}
	writeFile(t, filepath.Join(cfg, "git", "more"), "[user]\n\temail = ann@example.com\n")
	run("the include target made", "user.email=ann@example.com\nuser.name=Ann\n")
	writeFile(t, filepath.Join(cfg, "git", "config"), "[user]\n\tname = Bobby\n[include]\n\tpath = more\n")
	run("the config changed", "user.email=ann@example.com\nuser.name=Bobby\n")
}
