package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestToolCachesPerWorkspace (issue 40): what a session leaves in its
// tool caches (Go's build cache here) is there for the next session of the
// same workspace, also without --name, and never for a session of another
// workspace; a named session's kept home does not carry it. Before, every
// unnamed session started with an empty build cache.
func TestToolCachesPerWorkspace(t *testing.T) {
	needRig(t)
	ws, other := cloneRepo(t), cloneRepo(t)
	mustMosaic(t, "run", "--clone", "-w", ws, "--", "sh", "-c", "mkdir -p ~/.cache/go-build ~/go/pkg/mod && echo warm > ~/.cache/go-build/marker && echo mod > ~/go/pkg/mod/marker")
	if out := mustMosaic(t, "run", "--clone", "-w", ws, "--", "sh", "-c", "cat ~/.cache/go-build/marker ~/go/pkg/mod/marker").stdout; out != "warm\nmod\n" {
		t.Errorf("the next session of the workspace does not find its caches: %q", out)
	}
	if out := mosaic(t, "run", "--clone", "-w", other, "--", "sh", "-c", "cat ~/.cache/go-build/marker 2>&1; ls ~/.cache/go-build").stdout; strings.Contains(out, "warm") {
		t.Errorf("a session of another workspace sees the first one's cache: %q", out)
	}
	name := cloneSession(t)
	mustMosaic(t, "run", "--clone", "--name", name, "-w", ws, "--", "sh", "-c", "cat ~/.cache/go-build/marker >/dev/null && echo kept > ~/kept")
	home := filepath.Join(stateRoot(), "sessions", name, "home")
	if _, err := os.Stat(filepath.Join(home, "kept")); err != nil {
		t.Fatalf("the named session's home was not kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, ".cache", "go-build", "marker")); err == nil {
		t.Errorf("the named session's kept home carries the workspace's build cache")
	}
	mosaic(t, "discard", name)
	mosaic(t, "rm", "--force", name)
}

// TestToolCachesByPowers: a tool cache holds code the next session runs,
// so a session without network or keys must not plant it for a session
// of the same workspace that holds more (a host, direct mode's writes to
// the checkout): the workspace's caches are shared by sessions that hold
// the same powers only. The plant is shown to reach a session alike
// (what it would do to any session without the split).
func TestToolCachesByPowers(t *testing.T) {
	needRig(t)
	ws := cloneRepo(t)
	mustMosaic(t, "run", "-w", ws, "--", "sh", "-c", "mkdir -p ~/go/pkg/mod && echo planted > ~/go/pkg/mod/plant")
	read := "cat ~/go/pkg/mod/plant 2>/dev/null || echo none"
	if out := mustMosaic(t, "run", "-w", ws, "--", "sh", "-c", read).stdout; out != "planted\n" {
		t.Fatalf("a session alike does not see the plant, so this test shows nothing: %q", out)
	}
	for _, more := range [][]string{{"--allow-host", "mockhost.mosaic.test:443"}, {"--direct"}} {
		argv := append(append([]string{"run", "-w", ws}, more...), "--", "sh", "-c", read)
		if out := mustMosaic(t, argv...).stdout; out != "none\n" {
			t.Errorf("a session with %v runs what a session without it planted in the workspace's module cache: %q", more, out)
		}
	}
}
