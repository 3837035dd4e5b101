package request

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mosaic/units/errcode"
)

// repoAt makes dir look like a repository's top: a .git directory with objects.
func repoAt(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, ".git", "objects", "info"), 0o700); err != nil {
		t.Fatal(err)
	}
}

func TestCloneRefusals(t *testing.T) {
	p, _ := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	repoAt(t, app)
	for name, dir := range map[string]string{"sub": filepath.Join(app, "sub"), "wt": filepath.Join(p.Home, "src", "wt"), "borrow": filepath.Join(p.Home, "src", "borrow"), "plain": filepath.Join(p.Home, "src", "plain")} {
		os.MkdirAll(dir, 0o700)
		switch name {
		case "wt":
			os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: /x\n"), 0o600)
		case "borrow":
			repoAt(t, dir)
			os.WriteFile(filepath.Join(dir, ".git", "objects", "info", "alternates"), []byte("/elsewhere/objects\n"), 0o600)
		}
	}
	for _, tc := range []struct {
		name, want string
		req        Request
	}{
		{"not a repository", "git init", Request{Workspace: filepath.Join(p.Home, "src", "plain")}},
		{"a subdirectory of one", "top directory", Request{Workspace: filepath.Join(app, "sub")}},
		{"a linked worktree", ".git file", Request{Workspace: filepath.Join(p.Home, "src", "wt")}},
		{"borrowed objects", "alternates", Request{Workspace: filepath.Join(p.Home, "src", "borrow")}},
		{"a scope", "--scope", Request{Workspace: app, Scope: true}},
		{"landlock", "landlock", Request{Workspace: app, Sandbox: "landlock"}},
		{"a long name", "too long", Request{Workspace: app, Name: strings.Repeat("a", 57)}},
		{"a --base that is an option", "not a commit", Request{Workspace: app, Base: "--upload-pack=x"}},
		{"--base in direct mode", "--base", Request{Workspace: app, Base: "main", Mode: ModeDirect}},
		{"an unknown mode", "clone or direct", Request{Workspace: app, Mode: "copy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Command = []string{"true"}
			if tc.req.Mode == "" {
				tc.req.Mode = ModeClone
			}
			_, _, err := Prepare(tc.req, p, "/usr/bin/bwrap")
			if e := errcode.Of(err); err == nil || e.Code != "bad-clone" || e.Exit != errcode.ExitBadInput || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Prepare = %v, want bad-clone saying %q", err, tc.want)
			}
		})
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
	// The default comes from the profile's Workspace=, then mosaic.conf's workspace =.
	os.MkdirAll(filepath.Join(p.config(), "mosaic"), 0o700)
	os.WriteFile(filepath.Join(p.config(), "mosaic", ConfigFile), []byte("workspace = clone\n"), 0o600)
	if spec, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}}, p, "/usr/bin/bwrap"); err != nil || spec.Clone == nil {
		t.Errorf("mosaic.conf workspace = clone: %v %+v", err, spec.Clone)
	}
	if spec, _, err := Prepare(Request{Workspace: app, Mode: ModeDirect, Command: []string{"true"}}, p, "/usr/bin/bwrap"); err != nil || spec.Clone != nil {
		t.Errorf("--clone=false over mosaic.conf: %v %+v", err, spec.Clone)
	}
	os.WriteFile(filepath.Join(p.config(), "mosaic", ConfigFile), []byte("workspace = copy\n"), 0o600)
	if _, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}}, p, "/usr/bin/bwrap"); errcode.Of(err).Code != "bad-config" {
		t.Errorf("workspace = copy: %v, want bad-config", err)
	}
}
