package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Round four of issue 31 ("beyond the eight"): the host's other tools that
// read a workspace without the user asking them to run the project's code.

// direnvHost is the host's direnv, with its own allow list and config:
// allow approves dir's .envrc (as the user did before the session), and
// ran reports whether entering dir (direnv exec DIR CMD: what the shell
// does on cd, and then the prompt's command) ran the session's code, which
// touches mark. Without direnv (the 257 rig's root) ran is never called:
// the test then checks only what mosaic does.
type direnvHost struct {
	bin string
	env []string
}

// newDirenvHost finds direnv on PATH, or logs why the host side is not run.
func newDirenvHost(t *testing.T) *direnvHost {
	bin, err := exec.LookPath("direnv")
	if err != nil {
		t.Log("direnv is not installed here: checking only what mosaic does with what an .envrc names, not what direnv then runs")
		return nil
	}
	d := t.TempDir()
	return &direnvHost{bin: bin, env: append(os.Environ(), "XDG_DATA_HOME="+filepath.Join(d, "data"), "XDG_CONFIG_HOME="+filepath.Join(d, "config"), "XDG_CACHE_HOME="+filepath.Join(d, "cache"))}
}

func (h *direnvHost) run(t *testing.T, dir string, args ...string) {
	cmd := exec.Command(h.bin, args...)
	cmd.Dir, cmd.Env = dir, h.env
	if out, err := cmd.CombinedOutput(); err != nil && args[0] == "allow" {
		t.Fatalf("direnv %v: %v\n%s", args, err, out)
	}
}

func (h *direnvHost) allow(t *testing.T, dir string) { h.run(t, dir, "allow", dir) }

func (h *direnvHost) ran(t *testing.T, dir, mark string, command ...string) bool {
	os.Remove(mark)
	h.run(t, dir, append([]string{"exec", dir}, command...)...)
	_, err := os.Stat(mark)
	return err == nil
}

// writeFiles writes each path (relative to ws) with its content; a
// content starting with #! is made executable.
func writeFiles(t *testing.T, ws string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(ws, rel)
		mode := os.FileMode(0o644)
		if strings.HasPrefix(content, "#!") {
			mode = 0o755
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEnvrcTakesFromWorkspace: direnv approves an .envrc by its content
// alone, and at every cd then runs what it sources (`source
// .venv/bin/activate`, the most common .envrc). A session appending to
// activate ran on the host when the user's shell entered the directory.
// With --allow-write-host-exec the attack works (with direnv installed); by
// default the top's sourced file is read-only, also when a one-line
// conditional sources it. (What it puts on PATH, and an .envrc below the
// top, are not protected: the end-of-session walk that moved them aside
// is gone, issue 38.)
func TestEnvrcTakesFromWorkspace(t *testing.T) {
	needRig(t)
	host := newDirenvHost(t)
	cases := []struct {
		name    string
		files   map[string]string // the user's, before the session
		dir     string            // where the user's shell enters
		attack  string            // the session's
		command []string          // what the host runs there (the prompt's)
	}{
		{"source activate", map[string]string{".envrc": "source .venv/bin/activate\n", ".venv/bin/activate": "export VIRTUAL_ENV=x\n"}, ".",
			"echo 'touch MARK' >> .venv/bin/activate", []string{"true"}},
		// One-line conditionals (atk6): main read only a line's first command.
		{"if source; fi", map[string]string{".envrc": "if [ -f .venv/bin/activate ]; then source .venv/bin/activate; fi\n", ".venv/bin/activate": "export VIRTUAL_ENV=x\n"}, ".",
			"echo 'touch MARK' >> .venv/bin/activate", []string{"true"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, weak := range []bool{true, false} {
				ws := workspace(t)
				writeFiles(t, ws, c.files)
				dir := filepath.Join(ws, c.dir)
				mark := filepath.Join(ws, "MARK")
				if host != nil {
					host.allow(t, dir)
					if host.ran(t, dir, mark, c.command...) {
						t.Fatal("direnv ran the mark before the session: the test's setup is wrong")
					}
				}
				args := directRun(t, ws)
				if weak {
					args = append(args, "--allow-write-host-exec")
				}
				r := mosaic(t, append(args, "--", "sh", "-c", c.attack)...)
				ran := host != nil && host.ran(t, dir, mark, c.command...)
				if weak {
					if host != nil && !ran {
						t.Fatalf("with --allow-write-host-exec direnv did not run the session's code on entering %s, so this test proves nothing\n%s", c.dir, r.stderr)
					}
					continue
				}
				if ran {
					t.Errorf("entering %s, direnv ran what the session left\n%s", c.dir, r.stderr)
				}
				if r.code == 0 {
					t.Errorf("the session wrote the file the .envrc sources\n%s", r.stderr)
				}
			}
		})
	}
}

// TestToolConfigsPlanted: files the host's tools read from a workspace
// and act on without asking: mise's configs run hooks on cd and are
// trusted by their path (conf.d/*.toml all loaded), VS Code runs a
// devcontainer's initializeCommand on the host at "Reopen in Container",
// poetry takes a poetry.toml's repositories over the user's. None of these
// tools is in the rigs: this checks what mosaic does. With
// --allow-write-host-exec the session writes them (so the check below is
// mosaic's doing); by default the ones there at the start are read-only,
// and no file can be added to an existing conf.d.
func TestToolConfigsPlanted(t *testing.T) {
	needRig(t)
	existing := []string{"mise.toml", ".devcontainer/devcontainer.json", "poetry.toml", ".config/mise/conf.d/user.toml"}
	for _, weak := range []bool{true, false} {
		ws := workspace(t)
		files := map[string]string{}
		for _, rel := range existing {
			files[rel] = "# the user's\n"
		}
		writeFiles(t, ws, files)
		args := directRun(t, ws)
		if weak {
			args = append(args, "--allow-write-host-exec")
		}
		for _, rel := range existing {
			r := mosaic(t, append(args, "--", "sh", "-c", "echo '[hooks]' >> "+rel)...)
			b, _ := os.ReadFile(filepath.Join(ws, rel))
			if wrote := r.code == 0 && strings.Contains(string(b), "hooks"); wrote != weak {
				t.Errorf("--allow-write-host-exec %v: the session wrote the existing %s %v (exit %d): %q", weak, rel, wrote, r.code, b)
			}
		}
		// mise loads every *.toml of conf.d: none can be added either.
		r := mosaic(t, append(args, "--", "sh", "-c", "echo '[hooks]' > .config/mise/conf.d/new.toml")...)
		_, err := os.Stat(filepath.Join(ws, ".config/mise/conf.d/new.toml"))
		if added := r.code == 0 && err == nil; added != weak {
			t.Errorf("--allow-write-host-exec %v: the session added a file to the existing .config/mise/conf.d %v (exit %d, %v)", weak, added, r.code, err)
		}
	}
}

// TestCloneNamesToolFiles: in clone mode the change itself is what the
// host runs once applied, so mosaic diff names at the top each file of it
// the host's tools take unasked: here a new program (bin/git, which an
// .envrc's PATH_add bin runs before the host's git at the prompt), a
// .tool-versions and a subfolder's .vscode/settings.json. main named none
// of the three.
func TestCloneNamesToolFiles(t *testing.T) {
	needRig(t)
	ws := cloneRepo(t)
	name := cloneSession(t)
	mustMosaic(t, "run", "--clone", "--name", name, "-w", ws, "--", "sh", "-c",
		`set -e; mkdir -p bin web/.vscode; printf '#!/bin/sh\n' > bin/git; chmod +x bin/git; echo 'python path:./evil' > .tool-versions; echo '{}' > web/.vscode/settings.json`)
	r := mustMosaic(t, "diff", name, "--stat")
	top, _, _ := strings.Cut(r.stdout, " bin/git |")
	for _, p := range []string{"bin/git (added): a new program", ".tool-versions (added)", "web/.vscode/settings.json (added)"} {
		if !strings.Contains(top, p) {
			t.Errorf("mosaic diff did not name %q at the top:\n%s", p, r.stdout)
		}
	}
}

// TestHookScriptInTree: .git/hooks is read-only, but a hook is often a
// symlink into the tree (`ln -s ../../tools/pre-commit .git/hooks/`), or
// a stub that runs a script of it: the session appended to
// tools/pre-commit, and the user's next git commit ran it. With
// --allow-write-host-exec the attack works; by default the script a hook
// leads to is read-only.
func TestHookScriptInTree(t *testing.T) {
	needRig(t)
	for _, weak := range []bool{true, false} {
		ws := workspace(t)
		gitSetup(t, ws, "init", "-q")
		writeFiles(t, ws, map[string]string{"tools/pre-commit": "#!/bin/sh\nexit 0\n"})
		if err := os.Symlink("../../tools/pre-commit", filepath.Join(ws, ".git", "hooks", "pre-commit")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
		mark := filepath.Join(ws, "MARK")
		args := directRun(t, ws)
		if weak {
			args = append(args, "--allow-write-host-exec")
		}
		r := mosaic(t, append(args, "--", "sh", "-c", "printf '#!/bin/sh\\ntouch "+mark+"\\n' > tools/pre-commit")...)
		os.Remove(mark)
		gitSetup(t, ws, "commit", "-q", "--allow-empty", "-m", "x")
		_, err := os.Stat(mark)
		if weak {
			if err != nil {
				t.Fatalf("with --allow-write-host-exec the host's git commit did not run the session's tools/pre-commit, so this test proves nothing\n%s", r.stderr)
			}
			continue
		}
		if err == nil || r.code == 0 {
			t.Errorf("the session wrote tools/pre-commit (exit %d), or the host's git commit ran it (%v)\n%s", r.code, err == nil, r.stderr)
		}
	}
}
