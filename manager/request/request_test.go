package request

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mosaic/internal/errcode"
	"mosaic/sandbox"
)

// fixture is a user's directory tree in a temporary directory: a home with
// an agent's state and a project, a runtime dir, mosaic's state root.
func fixture(t *testing.T) (Paths, string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := Paths{Home: filepath.Join(root, "home"), RuntimeDir: filepath.Join(root, "run"), StateRoot: filepath.Join(root, "home", ".local", "state", "mosaic")}
	for _, d := range []string{p.Home, p.RuntimeDir, p.StateRoot, filepath.Join(p.Home, "src", "app"), filepath.Join(p.Home, ".claude"),
		filepath.Join(p.Home, ".ssh"), filepath.Join(p.StateRoot, "sessions", "other", "home"), filepath.Join(root, "opt")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// A symlink in the project that leads to the agent's state.
	if err := os.Symlink(filepath.Join(p.Home, ".claude"), filepath.Join(p.Home, "src", "app", "link-to-claude")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(p.Home, "src", "app"), filepath.Join(p.Home, "app-link")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", "/usr/bin:/bin")
	return p, root
}

func TestPrepareRefusals(t *testing.T) {
	p, root := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	for _, tc := range []struct {
		name string
		req  Request
		code string
	}{
		{"bad name", Request{Name: "Bad_Name", Workspace: app, Command: []string{"true"}}, "bad-name"},
		{"workspace missing", Request{Workspace: filepath.Join(root, "nope"), Command: []string{"true"}}, "bad-workspace"},
		{"workspace a file", Request{Workspace: "/etc/passwd", Command: []string{"true"}}, "bad-workspace"},
		{"workspace /", Request{Workspace: "/", Command: []string{"true"}}, "bad-workspace"},
		{"workspace is the home", Request{Workspace: p.Home, Command: []string{"true"}}, "bad-workspace"},
		{"workspace above the home", Request{Workspace: root, Command: []string{"true"}}, "bad-workspace"},
		{"workspace is the runtime dir", Request{Workspace: p.RuntimeDir, Command: []string{"true"}}, "bad-workspace"},
		{"workspace in the state root", Request{Workspace: filepath.Join(p.StateRoot, "sessions", "other"), Command: []string{"true"}}, "bad-workspace"},
		{"rw the home", Request{Workspace: app, ExtraRW: []string{p.Home}, Command: []string{"true"}}, "bad-bind"},
		{"ro the runtime dir", Request{Workspace: app, ExtraRO: []string{p.RuntimeDir}, Command: []string{"true"}}, "bad-bind"},
		{"ro another session's home", Request{Workspace: app, ExtraRO: []string{filepath.Join(p.StateRoot, "sessions", "other", "home")}, Command: []string{"true"}}, "bad-bind"},
		{"ro the agent's state", Request{Workspace: app, ExtraRO: []string{filepath.Join(p.Home, ".claude")}, Command: []string{"true"}}, "bad-bind"},
		{"ro the agent's state through a symlink", Request{Workspace: app, ExtraRO: []string{filepath.Join(app, "link-to-claude")}, Command: []string{"true"}}, "bad-bind"},
		{"rw /", Request{Workspace: app, ExtraRW: []string{"/"}, Command: []string{"true"}}, "bad-bind"},
		{"rw missing", Request{Workspace: app, ExtraRW: []string{filepath.Join(root, "nope")}, Command: []string{"true"}}, "bad-bind"},
		{"env without =", Request{Workspace: app, Env: []string{"NOEQUALS"}, Command: []string{"true"}}, "bad-env"},
		{"env with a newline", Request{Workspace: app, Env: []string{"A=b\nc"}, Command: []string{"true"}}, "bad-env"},
		{"no command", Request{Workspace: app}, "no-command"},
		{"command /tmp, a directory", Request{Workspace: app, Command: []string{"/tmp"}}, "bad-command"},
		{"workspace /tmp", Request{Workspace: "/tmp", Command: []string{"true"}}, "bad-workspace"},
		{"rw /var/tmp", Request{Workspace: app, ExtraRW: []string{"/var/tmp"}, Command: []string{"true"}}, "bad-bind"},
		{"command /", Request{Workspace: app, Command: []string{"/"}}, "bad-command"},
		{"command ./, the workspace", Request{Workspace: app, Command: []string{"./"}}, "bad-command"},
		{"unknown network", Request{Workspace: app, Network: "lan", Command: []string{"true"}}, "bad-network"},
		{"allow-host with none", Request{Workspace: app, Network: "none", AllowHosts: []string{"example.com"}, Command: []string{"true"}}, "bad-allow-host"},
		{"allow-host with host", Request{Workspace: app, Network: "host", AllowHosts: []string{"example.com"}, Command: []string{"true"}}, "bad-allow-host"},
		{"allow-host bad port", Request{Workspace: app, AllowHosts: []string{"example.com:http"}, Command: []string{"true"}}, "bad-allow-host"},
		{"allow-host unknown scheme", Request{Workspace: app, AllowHosts: []string{"gopher://example.com"}, Command: []string{"true"}}, "bad-allow-host"},
		{"allow-host unknown group", Request{Workspace: app, AllowHosts: []string{"@nope"}, Command: []string{"true"}}, "bad-allow-host"},
		{"unknown profile", Request{Workspace: app, Profile: "nope", Command: []string{"true"}}, "unknown-profile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Prepare(tc.req, p, "/usr/bin/bwrap")
			if got := errcode.Of(err); err == nil || got.Code != tc.code {
				t.Fatalf("Prepare = %v, want %s", err, tc.code)
			}
			if c, _ := errcode.Lookup(tc.code); c.Exit != errcode.Of(err).Exit {
				t.Errorf("exit %d, want %d", errcode.Of(err).Exit, c.Exit)
			}
		})
	}
}

func TestPrepareResolves(t *testing.T) {
	p, _ := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	spec, secrets, err := Prepare(Request{Workspace: filepath.Join(p.Home, "app-link"), Command: []string{"true"}, Network: "none"}, p, "/usr/bin/bwrap")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Workspace != app || spec.GivenAs != filepath.Join(p.Home, "app-link") {
		t.Errorf("workspace %s given as %s: want the real path, and the link as given", spec.Workspace, spec.GivenAs)
	}
	if len(secrets) != 0 || len(spec.Credentials) != 0 {
		t.Errorf("a generic session got secrets %v", secrets)
	}
	if spec.Profile != "generic" || spec.Network != sandbox.NetworkNone || !strings.HasPrefix(spec.Name, "true-") {
		t.Errorf("spec %+v", spec)
	}
	if spec.StateDir != filepath.Join(p.StateRoot, "sessions", spec.Name) {
		t.Errorf("state dir %s", spec.StateDir)
	}
}

func TestNetworkAndAllowHosts(t *testing.T) {
	p, _ := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	for _, tc := range []struct {
		req     Request
		network string
		allow   string
	}{
		{Request{}, "allow", ""}, // nothing yet, but grantable
		{Request{Network: "none"}, "none", ""},
		{Request{AllowHosts: []string{"api.example.com"}}, "allow", "api.example.com:443"},
		{Request{Network: "allow", AllowHosts: []string{"API.example.com:8443"}}, "allow", "api.example.com:8443"},
		{Request{Network: "host"}, "host", ""},
		{Request{AllowHosts: []string{"https://API.example.com/v1/messages"}}, "allow", "api.example.com:443"},
		{Request{AllowHosts: []string{"https://gw.example.com:8443"}}, "allow", "gw.example.com:8443"},
		{Request{AllowHosts: []string{"@pypi", "@npm", "x.example.com"}}, "allow", "@npm,@pypi,x.example.com:443"},
	} {
		tc.req.Workspace, tc.req.Command = app, []string{"true"}
		spec, _, err := Prepare(tc.req, p, "/usr/bin/bwrap")
		if err != nil {
			t.Fatalf("%+v: %v", tc.req, err)
		}
		if spec.Network != tc.network || strings.Join(spec.Allow, ",") != tc.allow {
			t.Errorf("%+v: network %s allow %v, want %s %s", tc.req, spec.Network, spec.Allow, tc.network, tc.allow)
		}
	}
}

func TestResolveCommand(t *testing.T) {
	p, root := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	bin := filepath.Join(root, "opt", "agent")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", filepath.Join(root, "opt")+":/usr/bin:/bin")
	for _, tc := range []struct {
		command []string
		run     string // what the session runs
		binary  string // what is bound for it
	}{
		{[]string{"sh", "-c", "x"}, "sh", ""},                              // a system binary is found inside
		{[]string{"agent", "--flag"}, bin, bin},                            // a per-user install is bound and run by its path
		{[]string{"./script.sh"}, "./script.sh", ""},                       // relative to the workspace, which is bound
		{[]string{"not-installed-anywhere"}, "not-installed-anywhere", ""}, // the init says it is not found
	} {
		got, binary := resolveCommand(tc.command, app)
		if got[0] != tc.run || binary != tc.binary || len(got) != len(tc.command) {
			t.Errorf("resolveCommand(%v) = %v, %q; want %s, %q", tc.command, got, binary, tc.run, tc.binary)
		}
	}
}
