package request

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mosaic/internal/errcode"
	"mosaic/units"
)

// policyFile writes a policy and names it in PolicyEnv, which adds it to
// the machine's (absent in the tests: there is no /etc/mosaic here).
func policyFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.conf")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(PolicyEnv, path)
	return path
}

// TestPolicyRefusesEachRule: each rule refuses the request that goes
// beyond it (policy-refused, exit 3, naming the rule's file and line), and
// lets the one within it through: the same request with the rule met.
func TestPolicyRefusesEachRule(t *testing.T) {
	p, root := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	opt := filepath.Join(root, "opt")
	t.Setenv("TEAM_TEST_TOKEN", "secret-value")
	for _, tc := range []struct {
		name, rule string
		beyond     Request
		within     Request
	}{
		{"network host", "network = allow", Request{Network: "host"}, Request{Network: "allow"}},
		{"network none is always allowed", "network = host", Request{Network: "allow", AllowHosts: []string{"example.com"}}, Request{Network: "none"}},
		{"a host off the list", "allow-host = example.com @npm", Request{AllowHosts: []string{"example.org"}}, Request{AllowHosts: []string{"example.com", "registry.npmjs.org"}}},
		{"a group wider than the list", "allow-host = registry.npmjs.org", Request{AllowHosts: []string{"@npm"}}, Request{AllowHosts: []string{"registry.npmjs.org:443"}}},
		{"another port", "allow-host = example.com", Request{AllowHosts: []string{"example.com:8443"}}, Request{AllowHosts: []string{"example.com"}}},
		{"an address outside the prefix", "allow-host = 10.0.0.0/24", Request{AllowHosts: []string{"10.0.1.0/24"}}, Request{AllowHosts: []string{"10.0.0.5"}}},
		{"a host loopback port", "allow-host = localhost:11434", Request{AllowHosts: []string{"localhost:8080"}}, Request{AllowHosts: []string{"127.0.0.1:11434"}}},
		{"may-launch", "may-launch = no", Request{MayLaunch: true}, Request{}},
		{"write-host-exec", "write-host-exec = no", Request{AllowWriteHostExec: true}, Request{}},
		{"publish", "publish = no", Request{Publish: []string{"8000"}}, Request{}},
		{"a credential off the list", "credentials = OTHER", Request{Credentials: []string{"TEAM_TEST_TOKEN"}}, Request{}},
		{"no credential at all", "credentials =", Request{Credentials: []string{"TEAM_TEST_TOKEN"}}, Request{}},
		{"a --ro outside", "bind-ro = " + opt, Request{ExtraRO: []string{filepath.Join(p.Home, "src")}}, Request{ExtraRO: []string{opt}}},
		{"a --rw at all", "bind-rw =", Request{ExtraRW: []string{opt}}, Request{}},
		{"memory above", "memory-max = 1G", Request{Limits: units.Limits{MemoryMax: 2 << 30}}, Request{Limits: units.Limits{MemoryMax: 1 << 30}}},
		{"memory lifted", "memory-max = 1G", Request{Limits: units.Limits{MemoryMax: units.Infinity}}, Request{}},
		{"tasks above", "tasks-max = 100", Request{Limits: units.Limits{TasksMax: 101}}, Request{Limits: units.Limits{TasksMax: 50}}},
		{"cpu above", "cpu-quota = 100%", Request{Limits: units.Limits{CPUQuota: 200}}, Request{}},
		{"runtime above", "runtime-max = 1h", Request{Limits: units.Limits{RuntimeMax: 2 * time.Hour}}, Request{Limits: units.Limits{RuntimeMax: time.Minute}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := policyFile(t, "# the team's policy\n\n"+tc.rule+"\n")
			for _, r := range []*Request{&tc.beyond, &tc.within} {
				r.Workspace, r.Command = app, []string{"true"}
			}
			_, _, err := Prepare(tc.beyond, p, "/usr/bin/bwrap")
			refusedBy(t, "beyond the rule", err, "policy-refused", path+":3")
			if _, _, err := Prepare(tc.within, p, "/usr/bin/bwrap"); err != nil {
				t.Fatalf("within the rule: Prepare = %v, want nil", err)
			}
		})
	}
}

// TestPolicyNotLiftedByProfileOrConfig: what the user's profile or
// mosaic.conf sets is judged as a flag is, and the built-in defaults are
// lowered to the policy's ceilings rather than refused.
func TestPolicyNotLiftedByProfileOrConfig(t *testing.T) {
	p, _ := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(p.Home, ".config"))
	writeTestFile(t, filepath.Join(p.Home, ".config", "mosaic", "profiles", "wide.conf"), "[Profile]\nNetwork=host\n")
	path := policyFile(t, "network = none allow\nmemory-max = 1G\nruntime-max = 30min\n")

	_, _, err := Prepare(Request{Workspace: app, Profile: "wide", Command: []string{"true"}}, p, "/usr/bin/bwrap")
	refusedBy(t, "a profile's Network=host", err, "policy-refused", path+":1 (network = none allow) refuses network host (the profile wide's Network=host)")
	spec, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}}, p, "/usr/bin/bwrap")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Limits.MemoryMax != 1<<30 || spec.Limits.RuntimeMax != 30*time.Minute {
		t.Errorf("defaults under the policy: %+v, want memory-max 1G and runtime-max 30min", spec.Limits)
	}
	writeTestFile(t, filepath.Join(p.Home, ".config", "mosaic", ConfigFile), "memory-max = 4G\n")
	_, _, err = Prepare(Request{Workspace: app, Command: []string{"true"}}, p, "/usr/bin/bwrap")
	refusedBy(t, "mosaic.conf's memory-max 4G", err, "policy-refused", path+":2")
}

// TestPolicyBadFile: a policy that does not parse is bad input naming its
// file and line, and nothing is prepared.
func TestPolicyBadFile(t *testing.T) {
	p, _ := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	for _, tc := range []struct{ text, want string }{
		{"network = lan\n", ":1: network = lan"},
		{"# ok\nno-such-rule = 1\n", ":2: "},
		{"memory-max = lots\n", ":1: memory-max"},
		{"memory-max = infinity\n", ":1: memory-max"},
		{"direct = maybe\n", ":1: direct"},
		{"allow-host = @nope\n", ":1: allow-host"},
		{"bind-ro = relative/dir\n", ":1: bind-ro"},
		{"direct = no\ndirect = yes\n", ":2: direct is given twice"},
		{"credentials = A\x1b[2J\n", ":1: the line holds a control character"},
	} {
		path := policyFile(t, tc.text)
		_, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}}, p, "/usr/bin/bwrap")
		refusedBy(t, tc.text, err, "bad-policy", path+tc.want)
	}
	t.Setenv(PolicyEnv, filepath.Join(t.TempDir(), "missing.conf"))
	_, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}}, p, "/usr/bin/bwrap")
	refusedBy(t, "a named policy that is missing (fail closed)", err, "bad-policy", "missing.conf")
}

// TestPolicyOwnSessions: mosaic's own sessions (the probe, a finish step)
// are not judged: a policy of direct = no must not break `doctor --probe`.
func TestPolicyOwnSessions(t *testing.T) {
	p, _ := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	policyFile(t, "direct = no\n")
	if _, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}, Own: true}, p, "/usr/bin/bwrap"); err != nil {
		t.Errorf("an own session: %v", err)
	}
	_, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}, Mode: ModeDirect}, p, "/usr/bin/bwrap")
	refusedBy(t, "a direct session under direct = no", err, "policy-refused", ":1 (direct = no)")
}

// TestPolicyGrant: mosaic allow is judged by the allow-host rules as a
// start's --allow-host is.
func TestPolicyGrant(t *testing.T) {
	path := policyFile(t, "allow-host = @npm\n")
	pol, err := ReadPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if err := pol.CheckGrant([]string{"registry.npmjs.org"}); err != nil {
		t.Errorf("a grant within: %v", err)
	}
	refusedBy(t, "a grant beyond", pol.CheckGrant([]string{"@pypi"}), "policy-refused", path+":1")
}

// refusedBy fails the test unless err is code, with its exit class, and
// its message holds want.
func refusedBy(t *testing.T, what string, err error, code, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %s", what, code)
		return
	}
	c, _ := errcode.Lookup(code)
	if e := errcode.Of(err); e.Code != code || e.Exit != c.Exit || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v (%s, exit %d), want %s (exit %d) saying %q", what, err, e.Code, e.Exit, code, c.Exit, want)
	}
}

// writeTestFile writes text at path, making its directories.
func writeTestFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMachinePolicyMustBeRoots: a machine policy another user owns (the
// user, or nobody) or anyone but root may write is refused, not read: it
// would be someone's settings in the machine's place.
func TestMachinePolicyMustBeRoots(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.conf")
	writeTestFile(t, path, "network = none\n")
	if os.Getuid() == 0 { // root writes root's files: give it to another
		if err := os.Chown(path, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		other := filepath.Join(t.TempDir(), "writable.conf")
		writeTestFile(t, other, "network = none\n")
		os.Chmod(other, 0o666)
		var pol Policy
		refusedBy(t, "a machine policy others may write", pol.read(other, true), "bad-policy", "writable by root alone")
		os.Chmod(other, 0o644)
		if err := pol.read(other, true); err != nil || len(pol.Rules) != 1 {
			t.Errorf("root's own 0644 policy: %v %+v", err, pol)
		}
	}
	var pol Policy
	refusedBy(t, "a machine policy not root's", pol.read(path, true), "bad-policy", "must be root's")
	if err := pol.read(path, false); err != nil || len(pol.Rules) != 1 {
		t.Errorf("the same file as MOSAIC_POLICY's: %v %+v", err, pol)
	}
	if err := pol.read(filepath.Join(t.TempDir(), "none.conf"), true); err != nil {
		t.Errorf("no machine policy: %v, want none", err)
	}
}

// TestPolicyNoProxyDefault: under a policy that allows no egress proxy,
// the default (allow, nothing yet) becomes none rather than a refusal; an
// asked host is still refused. Checked against a Prepare without the
// fallback: the default was refused.
func TestPolicyNoProxyDefault(t *testing.T) {
	p, _ := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	path := policyFile(t, "network = none\n")
	spec, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}}, p, "/usr/bin/bwrap")
	if err != nil || spec.Network != "none" {
		t.Fatalf("the default under network = none: %v, network %s; want none", err, spec.Network)
	}
	_, _, err = Prepare(Request{Workspace: app, Command: []string{"true"}, AllowHosts: []string{"example.com"}}, p, "/usr/bin/bwrap")
	refusedBy(t, "a host asked for", err, "policy-refused", path+":1")
}
