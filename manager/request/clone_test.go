package request

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mosaic/internal/errcode"
	"mosaic/units"
)

// repoAt makes dir look like a repository's top: a .git directory with objects.
func repoAt(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, ".git", "objects", "info"), 0o700); err != nil {
		t.Fatal(err)
	}
}

// TestCloneRefusals: what clone mode cannot copy is refused in one line
// naming --direct (bad-workspace); a bad flag of clone mode is bad-clone.
func TestCloneRefusals(t *testing.T) {
	p, _ := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	repoAt(t, app)
	for name, dir := range map[string]string{"sm": filepath.Join(p.Home, "src", "sm"), "borrow": filepath.Join(p.Home, "src", "borrow")} {
		os.MkdirAll(dir, 0o700)
		switch name {
		case "sm":
			os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: /x\n"), 0o600)
		case "borrow":
			repoAt(t, dir)
			os.WriteFile(filepath.Join(dir, ".git", "objects", "info", "alternates"), []byte("/elsewhere/objects\n"), 0o600)
		}
	}
	for _, tc := range []struct {
		name, code, want string
		req              Request
	}{
		{"a submodule's checkout", "bad-workspace", "submodule", Request{Workspace: filepath.Join(p.Home, "src", "sm")}},
		{"borrowed objects", "bad-workspace", "alternates", Request{Workspace: filepath.Join(p.Home, "src", "borrow")}},
		{"a long name", "bad-clone", "too long", Request{Workspace: app, Name: strings.Repeat("a", 57)}},
		{"a --base that is an option", "bad-clone", "not a commit", Request{Workspace: app, Base: "--upload-pack=x"}},
		{"--base in direct mode", "bad-clone", "--base", Request{Workspace: app, Base: "main", Mode: ModeDirect}},
		{"an unknown mode", "bad-clone", "clone or direct", Request{Workspace: app, Mode: "copy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Command = []string{"true"}
			_, _, err := Prepare(tc.req, p, "/usr/bin/bwrap")
			if err == nil {
				t.Fatalf("Prepare = nil, want %s saying %q", tc.code, tc.want)
			}
			e := errcode.Of(err)
			if e.Code != tc.code || e.Exit != errcode.ExitBadInput || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Prepare = %v (%s), want %s saying %q", err, e.Code, tc.code, tc.want)
			}
			if tc.code == "bad-workspace" && !strings.Contains(err.Error(), "--direct") {
				t.Errorf("the refusal does not name --direct: %v", err)
			}
		})
	}
}

// TestCloneKinds: with no flag a session is in clone mode, whatever its
// workspace: a plain directory gets a copy of its own kind (no objects
// borrowed), a subdirectory of a repository makes the repository's top
// the workspace and the subdirectory where the session starts;
// --sandbox landlock and mosaic's own sessions are as they say.
func TestCloneKinds(t *testing.T) {
	p, _ := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	repoAt(t, app)
	plain, sub := filepath.Join(p.Home, "src", "plain"), filepath.Join(app, "sub")
	os.MkdirAll(plain, 0o700)
	os.MkdirAll(sub, 0o700)
	prep := func(req Request) units.Spec {
		t.Helper()
		req.Command = []string{"true"}
		spec, _, err := Prepare(req, p, "/usr/bin/bwrap")
		if err != nil {
			t.Fatalf("Prepare(%+v): %v", req, err)
		}
		return spec
	}
	if s := prep(Request{Workspace: plain}); s.Clone == nil || s.Clone.Kind != units.ClonePlain || s.Clone.Objects != "" {
		t.Errorf("a plain directory: %+v", s.Clone)
	}
	s := prep(Request{Workspace: sub})
	if s.Clone == nil || s.Workspace != app || s.WorkDir != sub || s.Dir() != sub {
		t.Errorf("a subdirectory: workspace %s, work dir %s, clone %+v", s.Workspace, s.WorkDir, s.Clone)
	}
	if len(s.BindIDs) == 0 || s.BindIDs[0].Path != app {
		t.Errorf("a subdirectory's copy is not pinned to the repository's top: %+v", s.BindIDs)
	}
	if s := prep(Request{Workspace: app, Sandbox: "landlock"}); s.Clone == nil {
		t.Error("--sandbox landlock is not in clone mode")
	}
	if s := prep(Request{Workspace: app, Own: true}); s.Clone != nil {
		t.Error("mosaic's own session is in clone mode")
	}
	if s := prep(Request{Workspace: app, Mode: ModeDirect}); s.Clone != nil {
		t.Error("--direct is in clone mode")
	}
}

func TestCloneSpec(t *testing.T) {
	p, _ := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	repoAt(t, app)
	spec, _, err := Prepare(Request{Workspace: app, Name: "fix", Mode: ModeClone, Command: []string{"true"}}, p, "/usr/bin/bwrap")
	if err != nil {
		t.Fatal(err)
	}
	if c := spec.Clone; c == nil || c.Dir != filepath.Join(p.SessionDir("fix"), "clone") || c.Objects != filepath.Join(app, ".git", "objects") {
		t.Fatalf("clone %+v", spec.Clone)
	}
	// The default is clone; then the profile's Workspace=, mosaic.conf's workspace =.
	if spec, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}}, p, "/usr/bin/bwrap"); err != nil || spec.Clone == nil {
		t.Errorf("the default: %v %+v", err, spec.Clone)
	}
	os.MkdirAll(filepath.Join(p.config(), "mosaic"), 0o700)
	os.WriteFile(filepath.Join(p.config(), "mosaic", ConfigFile), []byte("workspace = direct\n"), 0o600)
	if spec, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}}, p, "/usr/bin/bwrap"); err != nil || spec.Clone != nil {
		t.Errorf("mosaic.conf workspace = direct: %v %+v", err, spec.Clone)
	}
	if spec, _, err := Prepare(Request{Workspace: app, Mode: ModeClone, Command: []string{"true"}}, p, "/usr/bin/bwrap"); err != nil || spec.Clone == nil {
		t.Errorf("--clone over mosaic.conf's direct: %v %+v", err, spec.Clone)
	}
	os.WriteFile(filepath.Join(p.config(), "mosaic", ConfigFile), []byte("workspace = clone\n"), 0o600)
	if spec, _, err := Prepare(Request{Workspace: app, Mode: ModeDirect, Command: []string{"true"}}, p, "/usr/bin/bwrap"); err != nil || spec.Clone != nil {
		t.Errorf("--clone=false over mosaic.conf: %v %+v", err, spec.Clone)
	}
	os.WriteFile(filepath.Join(p.config(), "mosaic", ConfigFile), []byte("workspace = copy\n"), 0o600)
	if _, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}}, p, "/usr/bin/bwrap"); errcode.Of(err).Code != "bad-config" {
		t.Errorf("workspace = copy: %v, want bad-config", err)
	}
}
