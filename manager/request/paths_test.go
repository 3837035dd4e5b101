package request

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mosaic/internal/errcode"
	"mosaic/sandbox"

	"golang.org/x/sys/unix"
)

// TestDenyListEveryEntry: every entry of the deny-list is refused as the
// workspace and as --ro and --rw, whether the path is the entry, inside it
// or (for all but the home) contains it; the entry exists first, so the
// refusal is the list's and not a missing path's.
func TestDenyListEveryEntry(t *testing.T) {
	p, _ := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	list, err := DenyList(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list {
		if d.Reason == "" {
			t.Errorf("%s has no reason", d.Path)
		}
		if !strings.HasPrefix(d.Path, p.Home) && !strings.HasPrefix(d.Path, p.RuntimeDir) && !strings.HasPrefix(d.Path, "/proc") &&
			!strings.HasPrefix(d.Path, "/sys") && !strings.HasPrefix(d.Path, "/dev") {
			t.Errorf("%s: an entry outside the fixture", d.Path)
		}
		if strings.HasPrefix(d.Path, p.Home+"/") || d.Path == p.RuntimeDir {
			if err := os.MkdirAll(filepath.Join(d.Path, "inner"), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		paths := []string{d.Path}
		if d.Inside {
			if _, err := os.Stat(filepath.Join(d.Path, "inner")); err == nil {
				paths = append(paths, filepath.Join(d.Path, "inner"))
			}
		}
		if d.Path != p.Home && strings.HasPrefix(d.Path, p.Home+"/") && filepath.Dir(d.Path) != p.Home {
			paths = append(paths, filepath.Dir(d.Path)) // contains it (~/.config for ~/.config/gh)
		}
		for _, path := range paths {
			for _, req := range []Request{{Workspace: path}, {Workspace: app, ExtraRO: []string{path}}, {Workspace: app, ExtraRW: []string{path}}} {
				req.Command = []string{"true"}
				want := "bad-bind"
				if req.Workspace == path {
					want = "bad-workspace"
				}
				_, _, err := Prepare(req, p, "/usr/bin/bwrap")
				if got := errcode.Of(err); err == nil || got.Code != want || got.Exit != 2 {
					t.Errorf("%s (%s) as %+v: %v, want %s", path, d.Reason, req, err, want)
				}
			}
		}
	}
	// Files and directories the issue names, each in the list.
	for _, rel := range []string{".ssh", ".aws", ".gnupg", ".kube", ".docker", ".netrc", ".git-credentials", ".config/gh", ".npmrc", ".pypirc",
		".local/share/keyrings", ".password-store", ".claude", ".claude.json", ".codex", ".pi", ".config/opencode", ".local/share/opencode",
		".bashrc", ".profile", ".bash_profile", ".zshrc", ".config/fish", ".config/mosaic", ".config/systemd"} {
		if denied(filepath.Join(p.Home, rel), list) == nil {
			t.Errorf("~/%s is not in the deny-list", rel)
		}
	}
	if denied(app, list) != nil {
		t.Errorf("a project in the home is denied")
	}
}

// TestDenyFile: the user's deny.conf adds entries, with a reason; a FIFO in
// its place is refused at once instead of blocking.
func TestDenyFile(t *testing.T) {
	p, root := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	secret := filepath.Join(root, "opt")
	conf := filepath.Join(p.Home, ".config", "mosaic", DenyFile)
	os.MkdirAll(filepath.Dir(conf), 0o700)
	os.WriteFile(conf, []byte("# mine\n"+secret+"   # the company's keys\n~/src/private\n"), 0o600)
	os.MkdirAll(filepath.Join(p.Home, "src", "private"), 0o700)
	for _, ws := range []string{secret, filepath.Join(p.Home, "src", "private")} {
		_, _, err := Prepare(Request{Workspace: ws, Command: []string{"true"}}, p, "/usr/bin/bwrap")
		if errcode.Of(err).Code != "bad-workspace" {
			t.Errorf("%s: %v, want bad-workspace", ws, err)
		}
	}
	if _, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}}, p, "/usr/bin/bwrap"); err != nil {
		t.Errorf("a project outside the user's entries: %v", err)
	}
	os.Remove(conf)
	if err := syscallMkfifo(conf); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}}, p, "/usr/bin/bwrap"); errcode.Of(err).Code != "bad-config" {
		t.Errorf("a FIFO as deny.conf: %v, want bad-config", err)
	}
}

// TestPlantedSymlinkRefused: a link a session could have planted that leads
// out of its directory is refused, naming the real path; one that stays in
// its directory, and the real path itself, are taken.
func TestPlantedSymlinkRefused(t *testing.T) {
	p, root := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	out := filepath.Join(root, "opt")
	os.Symlink(out, filepath.Join(app, "planted"))
	os.Mkdir(filepath.Join(app, "lib"), 0o700)
	os.Symlink("lib", filepath.Join(app, "inside"))
	os.Symlink(filepath.Join(app, "planted"), filepath.Join(app, "chain"))
	for _, ws := range []string{filepath.Join(app, "planted"), filepath.Join(app, "chain")} {
		_, _, err := Prepare(Request{Workspace: ws, Command: []string{"true"}}, p, "/usr/bin/bwrap")
		if errcode.Of(err).Code != "bad-workspace" || !strings.Contains(err.Error(), out) {
			t.Errorf("%s: %v, want bad-workspace naming %s", ws, err, out)
		}
	}
	for _, ws := range []string{filepath.Join(app, "inside"), out} {
		spec, _, err := Prepare(Request{Workspace: ws, Command: []string{"true"}}, p, "/usr/bin/bwrap")
		if err != nil {
			t.Errorf("%s: %v", ws, err)
			continue
		}
		if len(spec.BindIDs) != 1 || spec.BindIDs[0].Path != spec.Workspace {
			t.Errorf("%s: identities %v", ws, spec.BindIDs)
		}
		st, _ := sandbox.StatNoFollow(spec.Workspace)
		if spec.BindIDs[0].ID != sandbox.StatID(st) {
			t.Errorf("%s: recorded %s, is %s", ws, spec.BindIDs[0].ID, sandbox.StatID(st))
		}
	}
}

func syscallMkfifo(path string) error { return unix.Mkfifo(path, 0o600) }

// An entry that is itself a symlink is found by its real path too.
func TestDenySymlinkedEntry(t *testing.T) {
	p, root := fixture(t)
	real := filepath.Join(root, "opt", "aws-real")
	os.MkdirAll(real, 0o700)
	os.Symlink(real, filepath.Join(p.Home, ".aws"))
	_, _, err := Prepare(Request{Workspace: real, Command: []string{"true"}}, p, "/usr/bin/bwrap")
	if errcode.Of(err).Code != "bad-workspace" {
		t.Errorf("the real path of a symlinked ~/.aws: %v", err)
	}
}

// BenchmarkPrepare is the host side of the path policy: a workspace and two
// binds through the deny-list, the symlink rule and the identity read.
func BenchmarkPrepare(b *testing.B) {
	root, _ := filepath.EvalSymlinks(b.TempDir())
	p := Paths{Home: filepath.Join(root, "home"), RuntimeDir: filepath.Join(root, "run"), StateRoot: filepath.Join(root, "home", ".local", "state", "mosaic")}
	app := filepath.Join(p.Home, "src", "app")
	for _, d := range []string{app, filepath.Join(p.Home, "data"), filepath.Join(p.Home, "out")} {
		os.MkdirAll(d, 0o700)
	}
	b.Setenv("PATH", "/usr/bin:/bin")
	req := Request{Workspace: app, ExtraRO: []string{filepath.Join(p.Home, "data")}, ExtraRW: []string{filepath.Join(p.Home, "out")}, Command: []string{"true"}}
	for b.Loop() {
		if _, _, err := Prepare(req, p, "/usr/bin/bwrap"); err != nil {
			b.Fatal(err)
		}
	}
}
