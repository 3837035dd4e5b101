package inside

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mosaic/sandbox"
)

// TestGuardAgainstTheOutside: a layer that is the same as its outside (the
// promise read here, checked here) fails each check, with the reason.
func TestGuardAgainstTheOutside(t *testing.T) {
	home, _ := os.UserHomeDir()
	p := sandbox.HostPromise(home, t.TempDir(), false)
	if err := CheckUnit(p); err == nil || !strings.Contains(err.Error(), "user namespace") {
		t.Errorf("CheckUnit in the same namespaces: %v", err)
	}
	if err := CheckSandbox(p); err == nil || !strings.Contains(err.Error(), "PID 1") {
		t.Errorf("CheckSandbox outside any sandbox: %v", err)
	}
	// Namespaces that differ, but the real home still there.
	other := p
	other.NS = map[string]string{"user": "user:[1]", "mnt": "mnt:[1]", "pid": "pid:[1]"}
	if err := CheckUnit(other); err == nil || !strings.Contains(err.Error(), "real home") {
		t.Errorf("CheckUnit with the real home visible: %v", err)
	}
	q, err := sandbox.DecodePromise(p.Encode())
	if err != nil || q.HomeID != p.HomeID || q.NS["mnt"] != p.NS["mnt"] {
		t.Errorf("promise round trip: %+v, %v", q, err)
	}
	if _, err := sandbox.DecodePromise("not json"); err == nil {
		t.Error("a broken promise decoded")
	}
}

// TestInnerKeepsTheHostsNetwork: the init checks bwrap's user, mount and
// PID namespaces against the unit's, and the network namespace, which a
// service's bwrap shares with its unit, against the host's: a sandbox in
// the host's network still fails, one in its unit's own passes.
func TestInnerKeepsTheHostsNetwork(t *testing.T) {
	p := sandbox.Promise{NS: map[string]string{"user": "user:[1]", "mnt": "mnt:[1]", "pid": "pid:[1]", "net": "net:[1]"}, Net: true}
	in := inner(p)
	here := sandbox.Namespaces()
	if in.NS["net"] != "net:[1]" || in.NS["mnt"] != here["mnt"] || in.NS["user"] != here["user"] {
		t.Errorf("inner(p).NS = %v, want this process's but the host's net:[1]", in.NS)
	}
	// This process, its namespaces all "the unit's": only the network one
	// is not shared, since the host's is another.
	if k, _ := sharedNamespace(in, "user"); k != "user" {
		t.Errorf("sharedNamespace(user) = %q, want user (the unit's)", k)
	}
	if k, _ := sharedNamespace(in); k != "" {
		t.Errorf("the unit's own network namespace taken for the host's: %q", k)
	}
	p.NS["net"] = here["net"] // the host's network is this process's
	if k, _ := sharedNamespace(inner(p)); k != "net" {
		t.Errorf("a sandbox in the host's network namespace passed: %q", k)
	}
}

// TestCheckCgroup: the scope promise holds only in the promised cgroup (the
// init's first check in a scope; CheckSandbox's other checks need PID 1).
func TestCheckCgroup(t *testing.T) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skip("no /proc/self/cgroup")
	}
	var own string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && (parts[1] == "" || parts[1] == "name=systemd") {
			own = parts[2]
		}
	}
	if own == "" || own == "/" {
		t.Skip("this process is in the root cgroup")
	}
	if err := checkCgroup(own); err != nil {
		t.Errorf("own cgroup %s refused: %v", own, err)
	}
	if err := checkCgroup("/mosaic.slice/mosaic-elsewhere.scope"); err == nil {
		t.Error("a cgroup this process is not in was accepted")
	}
	// A scope has no exec shim: one given a scope's promise refuses it.
	if err := CheckUnit(sandbox.Promise{Scope: own}); err == nil {
		t.Error("the exec shim accepted a scope's promise")
	}
}

// BenchmarkCheckBindIDs is what the identity check costs a layer: a
// workspace, an --ro and an --rw path some levels deep.
func BenchmarkCheckBindIDs(b *testing.B) {
	dir, _ := filepath.EvalSymlinks(b.TempDir())
	var ids []sandbox.BindID
	for _, p := range []string{"home/u/src/app", "home/u/data", "home/u/out"} {
		path := filepath.Join(dir, p)
		os.MkdirAll(path, 0o755)
		st, _ := sandbox.StatNoFollow(path)
		ids = append(ids, sandbox.BindID{Path: path, ID: sandbox.StatID(st)})
	}
	for b.Loop() {
		if err := checkBindIDs(ids, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}
