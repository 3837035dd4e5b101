package main

import (
	"net"
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

// TestLiveGrantSharedCaches (issue 40): a session of the workspace plants
// a script in the module cache; a session started as it was (the same
// powers: the same cache) runs it after `mosaic allow` gave it a host
// (of the rig's test network), and the planted code reaches that host with the
// grant. The caches of a running session cannot move, so the grant says
// so, in one line naming the way out (start it with --allow-host), and in
// --json; before, it said nothing. A session started with the host has
// caches of its own, without the plant.
func TestLiveGrantSharedCaches(t *testing.T) {
	n := needTestNet(t)
	l := listenMock(t, n)
	go serve(l, "granted-service")
	_, port, _ := net.SplitHostPort(l.Addr().String())
	host := "mockhost.mosaic.test:" + port
	ws := workspace(t)
	get := "exec 3<>/dev/tcp/mockhost.mosaic.test/" + port + " && timeout 5 cat <&3"
	plant := "mkdir -p ~/go/pkg/mod/plant && cat > ~/go/pkg/mod/plant/run.sh <<'EOF'\n" + get + "\nEOF\n"
	mustMosaic(t, "run", "--direct", "-w", ws, "--network", "allow", "--", "bash", "-c", plant)
	s := &shellSession{name: sessionName(t), ws: ws}
	t.Cleanup(func() { mosaic(t, "rm", "--force", s.name) })
	if r := mosaic(t, "start", "--direct", "--name", s.name, "-w", ws, "--network", "allow", "--", "bash", "-c", shellLoop); r.code != 0 {
		t.Fatalf("start: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if out := s.run(t, "bash ~/go/pkg/mod/plant/run.sh"); strings.Contains(out, "granted-service") {
		t.Fatalf("the planted script reached the port before any grant:\n%s", out)
	}
	// The name and the test network's prefix its address is in (a
	// documentation range, which a name may resolve to only when allowed).
	r := mustMosaic(t, "allow", "--json", s.name, host, n+".0/24")
	if out := s.run(t, "bash ~/go/pkg/mod/plant/run.sh"); !strings.Contains(out, "granted-service") {
		t.Fatalf("the planted script did not reach the granted port, so this test shows nothing:\n%s", out)
	}
	doc := decode[struct {
		Shared string `json:"shared_tool_caches"`
	}](t, r.stdout)
	if doc.Shared == "" || !strings.Contains(r.stderr, "shares its tool caches") || !strings.Contains(r.stderr, "--allow-host "+host) {
		t.Errorf("the grant does not say the session shares its caches with sessions without it: stdout %s\nstderr %s", r.stdout, r.stderr)
	}
	if out := mustMosaic(t, "run", "--direct", "-w", ws, "--network", "allow", "--allow-host", host, "--allow-host", n+".0/24", "--", "sh", "-c", "ls ~/go/pkg/mod/plant 2>/dev/null || echo none").stdout; out != "none\n" {
		t.Errorf("a session started with the host shares the plant: %q", out)
	}
}
