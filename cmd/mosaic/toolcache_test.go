package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mosaic/manager/statedir"
)

// TestToolCachesPerWorkspace (issue 40): what a session leaves in its
// tool caches (Go's build and module caches, npm's, pip's, cargo's
// registry: the list, named here, not taken from
// sandbox.ToolCaches) is there for the next session of the
// same workspace, also without --name, and never for a session of another
// workspace; a named session's kept home does not carry it. Before, every
// unnamed session started with an empty build cache; a cache left out of
// the list fails here (tried with npm's).
func TestToolCachesPerWorkspace(t *testing.T) {
	needRig(t)
	ws, other := cloneRepo(t), cloneRepo(t)
	caches := []string{".cache/go-build", "go/pkg/mod", ".npm/_cacache", ".cache/pip", ".cargo/registry"}
	var write, read, want []string
	for _, c := range caches {
		write = append(write, "mkdir -p ~/"+c+" && echo "+c+" > ~/"+c+"/marker")
		read = append(read, "cat ~/"+c+"/marker 2>/dev/null || echo no-"+c)
		want = append(want, c)
	}
	mustMosaic(t, "run", "--clone", "-w", ws, "--", "sh", "-c", strings.Join(write, " && "))
	if out := mustMosaic(t, "run", "--clone", "-w", ws, "--", "sh", "-c", strings.Join(read, "; ")).stdout; out != strings.Join(want, "\n")+"\n" {
		t.Errorf("the next session of the workspace does not find its caches: %q, want %q", out, want)
	}
	if out := mosaic(t, "run", "--clone", "-w", other, "--", "sh", "-c", strings.Join(read, "; ")).stdout; out != "no-"+strings.Join(want, "\nno-")+"\n" {
		t.Errorf("a session of another workspace sees the first one's caches: %q", out)
	}
	name := cloneSession(t)
	mustMosaic(t, "run", "--clone", "--name", name, "-w", ws, "--", "sh", "-c", "cat ~/.cache/go-build/marker >/dev/null && echo kept > ~/kept")
	home := filepath.Join(stateRoot(), "sessions", name, "home")
	if _, err := os.Stat(filepath.Join(home, "kept")); err != nil {
		t.Fatalf("the named session's home was not kept: %v", err)
	}
	for _, c := range caches {
		if _, err := os.Stat(filepath.Join(home, c, "marker")); err == nil {
			t.Errorf("the named session's kept home carries the workspace's %s", c)
		}
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
	secrets := workspace(t) // a host directory only the later session reads
	for _, more := range [][]string{{"--allow-host", "mockhost.mosaic.test:443"}, {"--direct"}, {"--ro", secrets}} {
		argv := append(append([]string{"run", "-w", ws}, more...), "--", "sh", "-c", read)
		if out := mustMosaic(t, argv...).stdout; out != "none\n" {
			t.Errorf("a session with %v runs what a session without it planted in the workspace's module cache: %q", more, out)
		}
	}
}

// toolCachesOf are the tool cache directories that name workspace ws (one
// per set of powers its sessions held: request.ToolCacheDir).
func toolCachesOf(ws string) []string {
	var dirs []string
	all, _ := filepath.Glob(filepath.Join(stateRoot(), "caches", "*"))
	for _, d := range all {
		if b, err := os.ReadFile(filepath.Join(d, statedir.ToolCacheWorkspace)); err == nil && string(b) == ws+"\n" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}
