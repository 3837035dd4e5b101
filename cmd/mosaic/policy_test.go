package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"mosaic/manager/request"
)

// writePolicy writes a policy file for the rig's user and names it in
// MOSAIC_POLICY for this test's mosaic (which adds it to the machine's,
// /etc/mosaic/policy.conf: the rig shares /etc with the host, so the tests
// never write there).
func writePolicy(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(workspace(t), "policy.conf")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(request.PolicyEnv, path)
	return path
}

// refusedByPolicy checks that a --json mosaic call was refused by the
// policy's rule at where, with exit 3, and that nothing of session name
// was started or written.
func refusedByPolicy(t *testing.T, what string, r result, where, name string) {
	t.Helper()
	if r.code != 3 {
		t.Errorf("%s: exit %d, want 3\n%s%s", what, r.code, r.stdout, r.stderr)
		return
	}
	code, msg := jsonError(t, r)
	if code != "policy-refused" || !strings.Contains(msg, where) {
		t.Errorf("%s: %s %q, want policy-refused naming %s", what, code, msg, where)
	}
	if name == "" {
		return
	}
	if u := mosaicUnits(t); strings.Contains(u, "mosaic-"+name) {
		t.Errorf("%s: a unit of the refused session exists:\n%s", what, u)
	}
	if _, err := os.Stat(filepath.Join(stateRoot(), "sessions", name)); err == nil {
		t.Errorf("%s: the refused session's state directory was made", what)
	}
}

// TestPolicyOnTheRig: a policy's rules refuse a flag, a user profile and
// mosaic.conf beyond them on the real rig, before any unit or state exists;
// a session within runs; a grant beyond the hosts is refused while the
// session runs; and `mosaic policy --json` names each rule's file and line.
func TestPolicyOnTheRig(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	id := randomHex()
	path := writePolicy(t, "# the team's\nnetwork = none allow\nallow-host = example.com\nmay-launch = no\nmemory-max = 1G\n")

	name := sessionName(t)
	r := mosaic(t, "start", "--json", "--name", name, "--workspace", ws, "--network", "host", "--", "sleep", "60")
	refusedByPolicy(t, "--network host", r, path+":2", name)
	r = mosaic(t, "start", "--json", "--name", name, "--workspace", ws, "--may-launch", "--", "sleep", "60")
	refusedByPolicy(t, "--may-launch", r, path+":4", name)

	profile := "wide" + id[:4]
	profileFile := filepath.Join(configDir(), "mosaic", "profiles", profile+".conf")
	os.MkdirAll(filepath.Dir(profileFile), 0o700)
	os.WriteFile(profileFile, []byte("[Profile]\nNetwork=host\n"), 0o600)
	t.Cleanup(func() { os.Remove(profileFile) })
	r = mosaic(t, "start", "--json", "--name", name, "--workspace", ws, "--profile", profile, "--", "sleep", "60")
	refusedByPolicy(t, "a profile's Network=host", r, path+":2", name)

	conf := filepath.Join(configDir(), "mosaic", "mosaic.conf")
	if old, err := os.ReadFile(conf); err == nil {
		t.Cleanup(func() { os.WriteFile(conf, old, 0o600) })
	} else {
		t.Cleanup(func() { os.Remove(conf) })
	}
	os.WriteFile(conf, []byte("memory-max = 4G\n"), 0o600)
	r = mosaic(t, "start", "--json", "--name", name, "--workspace", ws, "--", "sleep", "60")
	refusedByPolicy(t, "mosaic.conf's memory-max 4G", r, path+":5", name)
	os.WriteFile(conf, []byte("memory-max = 512M\n"), 0o600)

	// Within every rule: it runs, and a grant beyond the hosts is refused.
	mustMosaic(t, "start", "--name", name, "--workspace", ws, "--allow-host", "example.com", "--", "sleep", "60")
	if m := unitProperty(t, "mosaic-"+name+".service", "MemoryMax"); m != "536870912" {
		t.Errorf("the session within has MemoryMax=%s, want mosaic.conf's 512M", m)
	}
	r = mosaic(t, "allow", "--json", name, "example.org")
	refusedByPolicy(t, "mosaic allow beyond the hosts", r, path+":3", "")
	mustMosaic(t, "allow", name, "example.com")

	r = mustMosaic(t, "policy", "--json")
	var pol struct {
		Files []string
		Rules []struct {
			Rule, Value, File string
			Line              int
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &pol); err != nil {
		t.Fatalf("mosaic policy --json: %v\n%s", err, r.stdout)
	}
	if len(pol.Rules) != 4 || pol.Rules[1].Rule != "allow-host" || pol.Rules[1].File != path || pol.Rules[1].Line != 3 || pol.Rules[1].Value != "example.com" {
		t.Errorf("mosaic policy --json: %+v, want the 4 rules with their file and line", pol)
	}
	if r := mustMosaic(t, "policy"); !strings.Contains(r.stdout, path+":5") {
		t.Errorf("mosaic policy does not name memory-max's line:\n%s", r.stdout)
	}
}

// TestPolicyBadOnTheRig: a policy that does not parse refuses every start
// as bad input (exit 2) naming its file and line; nothing starts.
func TestPolicyBadOnTheRig(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	path := writePolicy(t, "network = none\nnetwrok = allow\n")
	name := sessionName(t)
	r := mosaic(t, "start", "--json", "--name", name, "--workspace", ws, "--", "sleep", "60")
	if code, msg := jsonError(t, r); r.code != 2 || code != "bad-policy" || !strings.Contains(msg, path+":2") {
		t.Errorf("a bad policy: exit %d %s %q, want 2 bad-policy naming %s:2", r.code, code, msg, path)
	}
	if u := mosaicUnits(t); strings.Contains(u, "mosaic-"+name) {
		t.Errorf("a unit started under a bad policy:\n%s", u)
	}
}

// TestPolicyBusLaunch: the bus judges what it launches by the same
// policy, in its own process (its unit's environment names the file): a
// launch beyond a rule is refused with the rule's line, from the host and
// from a --may-launch session alike.
func TestPolicyBusLaunch(t *testing.T) {
	needBusRig(t)
	root := workspace(t)
	path := writePolicy(t, "network = none allow\nmemory-max = 1G\n")
	systemctl(t, "set-environment", request.PolicyEnv+"="+path)
	t.Cleanup(func() { systemctl(t, "unset-environment", request.PolicyEnv) })
	// A profile of the user's the bus lets sessions launch, whose network
	// the policy does not allow.
	profile := "hostnet" + randomHex()[:4]
	profileFile := filepath.Join(configDir(), "mosaic", "profiles", profile+".conf")
	os.MkdirAll(filepath.Dir(profileFile), 0o700)
	os.WriteFile(profileFile, []byte("[Profile]\nNetwork=host\n"), 0o600)
	t.Cleanup(func() { os.Remove(profileFile) })
	busConf := filepath.Join(configDir(), "mosaic", "bus.conf")
	os.WriteFile(busConf, []byte("[Launch]\nProfile=generic 4\nProfile="+profile+" 4\nWorkspaceRoot="+root+"\nCommand="+profile+" sleep 60\n"), 0o600)
	t.Cleanup(func() { os.Remove(busConf) })
	if r := installScript(t, "--mosaic", mosaicBin); r.code != 0 {
		t.Fatalf("install: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Cleanup(func() { installScript(t, "--uninstall") })
	systemctl(t, "restart", "mosaic-bus.service") // with the environment above

	// From the host, with the CLI's own check out of the way (its
	// environment names no policy): the bus alone refuses.
	name := sessionName(t)
	r := mosaicWith(t, []string{request.PolicyEnv + "="}, "", "bus", "launch", "--json", "--name", name, "-w", root, "--profile", "generic", "--memory-max", "2G", "--", "sleep", "60")
	refusedByPolicy(t, "a bus launch with --memory-max 2G", r, path+":2", name)

	pm, child := sessionName(t), sessionName(t)
	script := `mosaic bus launch --json --name ` + child + ` -w ` + root + ` --profile ` + profile + `; echo "rc=$?"`
	r = mosaic(t, "run", "--name", pm, "--may-launch", "--workspace", root, "--", "sh", "-c", script)
	if !strings.Contains(r.stdout, `"code":"policy-refused"`) || !strings.Contains(r.stdout, path+":1") || !strings.Contains(r.stdout, "rc=3") {
		t.Errorf("a launch from a session of a profile with Network=host: %s%s, want policy-refused naming %s:1", r.stdout, r.stderr, path)
	}
	if u := mosaicUnits(t); strings.Contains(u, "mosaic-"+child) {
		t.Errorf("the refused launch started:\n%s", u)
	}
}

// TestProjectFileOnTheRig: a repository's .mosaic.conf asks for a host and
// a memory limit; the first session starts without them and says how to
// accept; `mosaic trust` without --yes (no terminal) only shows; once
// accepted the next session has both; a session's own edit of the file
// (direct mode) makes the next one start without them again; and an
// accepted ask beyond the machine's policy is refused naming the policy's
// line.
func TestProjectFileOnTheRig(t *testing.T) {
	needRig(t)
	t.Setenv(request.PolicyEnv, "")
	ws := workspace(t)
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	file := filepath.Join(ws, request.ProjectFile)
	os.WriteFile(file, []byte("# our builds\nask-allow-host = example.com\nask-memory-max = 768M\n"), 0o644)
	// started's network is the session's network and its hosts: "allow "
	// is the default, which reaches nothing yet.
	started := func() (network, memory, said string) {
		t.Helper()
		name := sessionName(t)
		r := mustMosaic(t, "start", "--name", name, "--workspace", ws, "--clone=false", "--", "sleep", "60")
		st := decode[struct {
			Network    string
			AllowHosts []string `json:"allow_hosts"`
		}](t, mustMosaic(t, "status", "--json", name).stdout)
		memory = unitProperty(t, "mosaic-"+name+".service", "MemoryMax")
		mustMosaic(t, "stop", name)
		return st.Network + " " + strings.Join(st.AllowHosts, ","), memory, r.stdout + r.stderr // start's text result says its notes
	}

	if n, m, e := started(); n != "allow " || m == "805306368" || !strings.Contains(e, "mosaic trust "+ws) {
		t.Errorf("untrusted: network %s, MemoryMax %s, output %q: want allow with no host, the default, and the command to accept", n, m, e)
	}
	r := mustMosaic(t, "trust", "--json", ws)
	if !strings.Contains(r.stdout, `"trusted": false`) || !strings.Contains(r.stdout, `"ask-allow-host"`) {
		t.Errorf("mosaic trust without --yes and without a terminal accepted, or did not show the asks:\n%s", r.stdout)
	}
	mustMosaic(t, "trust", "--yes", ws)
	doc := decode[struct {
		Project struct {
			Path    string
			Trusted bool
		}
	}](t, mustMosaic(t, "policy", "--json", ws).stdout)
	if doc.Project.Path != file || !doc.Project.Trusted {
		t.Errorf("mosaic policy --json DIR: project %+v, want %s accepted", doc.Project, file)
	}
	if n, m, e := started(); n != "allow example.com:443" || m != "805306368" || strings.Contains(e, "mosaic trust") {
		t.Errorf("accepted: network %s, MemoryMax %s, output %q: want allow and 768M, no note", n, m, e)
	}

	// The agent edits the file in direct mode: its edit takes no effect.
	mustMosaic(t, "run", "--workspace", ws, "--clone=false", "--", "sed", "-i", "s/= example.com/= example.com @packages/", request.ProjectFile)
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), "@packages") {
		t.Fatalf("the session's edit did not reach the file: %s", b)
	}
	if n, _, e := started(); n != "allow " || !strings.Contains(e, "mosaic trust "+ws) {
		t.Errorf("after a session's edit: network %s, output %q: want no host and the question again", n, e)
	}

	// Accepted, but beyond the machine's policy: refused before anything.
	mustMosaic(t, "trust", "--yes", ws)
	path := writePolicy(t, "allow-host = example.com\n")
	name := sessionName(t)
	r = mosaic(t, "start", "--json", "--name", name, "--workspace", ws, "--clone=false", "--", "sleep", "60")
	refusedByPolicy(t, "an accepted ask beyond the policy", r, path+":1", name)
}

// TestPolicyLeavesOwnSessions: under a policy of clone mode only and a
// runtime-max (which a finish step's own limit would not meet), a direct session is refused while mosaic's own
// sessions still run: `doctor --probe`'s stand-in (direct, in a plain
// directory) and a clone's finish step (with its own time limit), whose
// change then shows in `mosaic diff`.
func TestPolicyLeavesOwnSessions(t *testing.T) {
	needRig(t)
	ws := cloneRepo(t)
	path := writePolicy(t, "direct = no\nruntime-max = 2min\n") // a finish step has 5min
	name := cloneSession(t)
	r := mosaic(t, "run", "--json", "--clone=false", "--name", name, "-w", ws, "--", "true")
	refusedByPolicy(t, "a direct session under direct = no", r, path+":1", name)

	mustMosaic(t, "run", "--clone", "--name", name, "-w", ws, "--", "sh", "-c", "echo new > added.txt")
	if got := paths(diffOf(t, name)); !strings.Contains(got, "added.txt") {
		t.Errorf("the clone's change under the policy: %s, want added.txt (its finish step ran)", got)
	}
	if d, code := runDoctor(t, nil, "--probe"); code != 0 || !d.OK {
		t.Errorf("doctor --probe under direct = no: exit %d, %+v", code, d.Probe)
	}
}
