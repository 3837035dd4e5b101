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
// .venv/bin/activate`, the most common .envrc) and puts the directories
// it names on PATH (PATH_add bin, layout node), where the shell prompt's
// git is looked up first. A session appending to activate, or leaving
// bin/git, ran on the host when the user's shell entered the directory;
// the same for an .envrc below the top. With --allow-write-host-exec each
// attack works (with direnv installed); by default the top's sourced file
// is read-only, and what shadows a host program in a PATH directory, or a
// sourced file below the top, is moved aside and said; a program only the
// project has (bin/projtool) stays.
func TestEnvrcTakesFromWorkspace(t *testing.T) {
	needRig(t)
	host := newDirenvHost(t)
	sh := func(body string) string { return "#!/bin/sh\n" + body + "\n" }
	cases := []struct {
		name    string
		files   map[string]string // the user's, before the session
		dir     string            // where the user's shell enters
		attack  string            // the session's
		command []string          // what the host runs there (the prompt's)
		moved   string            // what mosaic moves aside ("" when it is read-only)
	}{
		{"source activate", map[string]string{".envrc": "source .venv/bin/activate\n", ".venv/bin/activate": "export VIRTUAL_ENV=x\n"}, ".",
			"echo 'touch MARK' >> .venv/bin/activate", []string{"true"}, ""},
		{"PATH_add bin", map[string]string{".envrc": "PATH_add bin\n", "bin/projtool": sh("echo mine")}, ".",
			`printf '#!/bin/sh\ntouch MARK\nexec /usr/bin/git "$@"\n' > bin/git && chmod +x bin/git && echo '#!/bin/sh' > bin/projtool2 && chmod +x bin/projtool2`, []string{"git", "status"}, "bin/git"},
		{"layout node below the top", map[string]string{"web/.envrc": "layout node\n", "web/node_modules/.bin/.keep": ""}, "web",
			`printf '#!/bin/sh\ntouch ../MARK\n' > web/node_modules/.bin/ls && chmod +x web/node_modules/.bin/ls`, []string{"ls"}, "web/node_modules/.bin/ls"},
		{"go toolchain on PATH", map[string]string{".envrc": "PATH_add bin\n", "bin/.keep": ""}, ".",
			`printf 'module x\n\ngo 1.99.1\n' > go.mod && printf '#!/bin/sh\ntouch MARK\n' > bin/go1.99.1 && chmod +x bin/go1.99.1`, []string{"env", "GOTOOLCHAIN=auto", "go", "version"}, "bin/go1.99.1"},
		{"source below the top", map[string]string{"api/.envrc": "source ./env.sh\n", "api/env.sh": "export A=1\n"}, "api",
			"echo 'touch ../MARK' >> api/env.sh", []string{"true"}, "api/env.sh"},
		// One-line conditionals (atk6): main read only a line's first command.
		{"if source; fi", map[string]string{".envrc": "if [ -f .venv/bin/activate ]; then source .venv/bin/activate; fi\n", ".venv/bin/activate": "export VIRTUAL_ENV=x\n"}, ".",
			"echo 'touch MARK' >> .venv/bin/activate", []string{"true"}, ""},
		{"test && PATH_add bin", map[string]string{".envrc": "test -d bin && PATH_add bin\n", "bin/.keep": ""}, ".",
			`printf '#!/bin/sh\ntouch MARK\nexec /usr/bin/git "$@"\n' > bin/git && chmod +x bin/git`, []string{"git", "status"}, "bin/git"},
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
				time.Sleep(1100 * time.Millisecond) // the user's files are older than the session
				args := []string{"run", "-w", ws}
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
				if c.moved == "" {
					if r.code == 0 {
						t.Errorf("the session wrote the file the .envrc sources\n%s", r.stderr)
					}
					continue
				}
				if _, err := os.Lstat(filepath.Join(ws, c.moved)); err == nil || !strings.Contains(r.stderr, filepath.Join(ws, c.moved)) || !strings.Contains(r.stderr, "moved aside") {
					t.Errorf("%s is still there (%v), or run did not say it moved it aside:\n%s", c.moved, err, r.stderr)
				}
				if c.name == "PATH_add bin" {
					if _, err := os.Stat(filepath.Join(ws, "bin", "projtool2")); err != nil {
						t.Errorf("bin/projtool2, a program only the project has, was moved: %v", err)
					}
				}
			}
		})
	}
}

// TestRebaseTodoExec: an in-progress rebase's todo lives in .git, which
// the session can write but for config and hooks, and git runs the shell
// command of each exec line in it at `git rebase --continue`. The user
// stopped a rebase (an edit) and asked the agent to fix the commit; the
// session appended an exec line, and the user's `git rebase --continue`
// ran it. With --allow-write-host-exec the attack works; by default the
// changed todo is moved aside and said, and git refuses to continue.
func TestRebaseTodoExec(t *testing.T) {
	needRig(t)
	for _, weak := range []bool{true, false} {
		ws := workspace(t)
		gitSetup(t, ws, "init", "-q")
		gitSetup(t, ws, "commit", "-q", "--allow-empty", "-m", "a")
		gitSetup(t, ws, "commit", "-q", "--allow-empty", "-m", "b")
		gitSetup(t, ws, "-c", "sequence.editor=sed -i 1s/^pick/edit/", "rebase", "-q", "-i", "--keep-empty", "HEAD~1")
		time.Sleep(1100 * time.Millisecond)
		mark := filepath.Join(ws, "MARK")
		args := []string{"run", "-w", ws}
		if weak {
			args = append(args, "--allow-write-host-exec")
		}
		r := mustMosaic(t, append(args, "--", "sh", "-c", "echo 'exec touch "+mark+"' >> .git/rebase-merge/git-rebase-todo")...)
		hostGit(ws, "-c", "core.editor=true", "rebase", "--continue")
		_, err := os.Stat(mark)
		if weak {
			if err != nil {
				t.Fatalf("with --allow-write-host-exec the host's git rebase --continue did not run the exec line the session added, so this test proves nothing\n%s", r.stderr)
			}
			continue
		}
		if err == nil {
			t.Error("the host's git rebase --continue ran the exec line the session added")
		}
		if todo := filepath.Join(ws, ".git", "rebase-merge", "git-rebase-todo"); !strings.Contains(r.stderr, todo) || !strings.Contains(r.stderr, "moved aside") {
			t.Errorf("run did not say it moved %s aside:\n%s", todo, r.stderr)
		}
	}
}

// TestToolConfigsPlanted: files the host's tools read from a workspace
// and act on without asking, made or changed by a session. asdf and mise
// take a version from .tool-versions or a mise config in the directory or
// any above it, and a path:DIR version runs DIR's programs (a shell
// prompt's python --version); mise's configs also run hooks on cd and are
// trusted by their path: every name of mise's discovery list (the rtx and
// local ones, mise/config.toml, conf.d/*.toml, a MISE_ENV profile's
// mise.dev.toml). VS Code runs a devcontainer's initializeCommand on
// the host at "Reopen in Container"; vim with 'exrc' runs .vimrc. uv takes a
// uv.toml's index over the user's, and pip a virtual environment's
// pip.conf (its site config; shown with Debian 12's pip on the host:
// `pip config list` in the venv gave the planted index-url). None of these tools is in
// the rigs: this checks what mosaic does. With --allow-write-host-exec what
// the session made stays (so the check below is mosaic's doing); by default
// one made at the top or below it is moved aside and said, and one that
// was there is read-only.
func TestToolConfigsPlanted(t *testing.T) {
	needRig(t)
	made := []string{".tool-versions", "crates/a/.tool-versions", "crates/b/mise.toml", "crates/c/.config/mise/config.toml",
		".devcontainer.json", ".vimrc", "uv.toml", "crates/d/uv.toml", ".venv/pip.conf",
		// The rest of mise's discovery list (tidy): main protected none.
		".rtx.toml", "mise/config.toml", ".config/mise.local.toml", "mise.dev.toml", "crates/e/.rtx.local.toml",
		"crates/c/.config/mise/conf.d/evil.toml", "crates/f/.mise/config.local.toml", "crates/f/mise/config.toml"}
	existing := []string{"mise.toml", ".devcontainer/devcontainer.json", "poetry.toml", ".config/mise/conf.d/user.toml"}
	attack := "for f in " + strings.Join(made, " ") + "; do mkdir -p $(dirname $f) && echo 'python path:./evil' > $f; done"
	for _, weak := range []bool{true, false} {
		ws := workspace(t)
		files := map[string]string{".venv/pyvenv.cfg": "home = /usr/bin\n"}
		for _, rel := range existing {
			files[rel] = "# the user's\n"
		}
		writeFiles(t, ws, files)
		time.Sleep(1100 * time.Millisecond)
		args := []string{"run", "-w", ws}
		if weak {
			args = append(args, "--allow-write-host-exec")
		}
		r := mustMosaic(t, append(args, "--", "sh", "-c", attack)...)
		for _, rel := range made {
			_, err := os.Lstat(filepath.Join(ws, rel))
			if weak && err != nil {
				t.Fatalf("with --allow-write-host-exec %s is gone: %v", rel, err)
			}
			if !weak && (err == nil || !strings.Contains(r.stderr, filepath.Join(ws, rel))) {
				t.Errorf("%s, made by the session, is still there (%v), or run did not say it moved it aside:\n%s", rel, err, r.stderr)
			}
		}
		for _, rel := range existing {
			r = mosaic(t, append(args, "--", "sh", "-c", "echo '[hooks]' >> "+rel)...)
			if b, _ := os.ReadFile(filepath.Join(ws, rel)); !weak && (r.code == 0 || strings.Contains(string(b), "hooks")) {
				t.Errorf("the session wrote the existing %s (exit %d): %q", rel, r.code, b)
			}
		}
		// mise loads every *.toml of conf.d: none can be added either.
		r = mosaic(t, append(args, "--", "sh", "-c", "echo '[hooks]' > .config/mise/conf.d/new.toml")...)
		if _, err := os.Stat(filepath.Join(ws, ".config/mise/conf.d/new.toml")); !weak && (r.code == 0 || err == nil) {
			t.Errorf("the session added a file to the existing .config/mise/conf.d (exit %d, %v)", r.code, err)
		}
	}
}

// TestPromptEscapeInHead: git's shell prompt (git-sh-prompt's __git_ps1,
// which many a PS1 runs in every directory) reads .git/HEAD with the
// shell's read and prints the branch raw. A session that writes an escape
// sequence there (OSC 0, a window title here; OSC 52 would write the
// clipboard) has it reach the user's terminal at the next prompt in the
// workspace. With --allow-write-host-exec the prompt prints the ESC; by
// default the HEAD that no ref name can be is moved aside and said, and
// the prompt prints no control byte.
func TestPromptEscapeInHead(t *testing.T) {
	needRig(t)
	prompt := "/usr/lib/git-core/git-sh-prompt"
	if _, err := os.Stat(prompt); err != nil {
		t.Logf("git's prompt is not installed here (%v): checking only what mosaic does with HEAD", err)
		prompt = ""
	}
	ps1 := func(ws string) string {
		if prompt == "" {
			return ""
		}
		cmd := exec.Command("bash", "-c", `source "$1"; __git_ps1 "[%s]"`, "bash", prompt)
		cmd.Dir = ws
		out, _ := cmd.Output()
		return string(out)
	}
	for _, weak := range []bool{true, false} {
		ws := workspace(t)
		gitSetup(t, ws, "init", "-q")
		time.Sleep(1100 * time.Millisecond)
		args := []string{"run", "-w", ws}
		if weak {
			args = append(args, "--allow-write-host-exec")
		}
		r := mustMosaic(t, append(args, "--", "sh", "-c", `printf 'ref: refs/heads/ma\033]0;PWNED\007in\n' > .git/HEAD`)...)
		got := ps1(ws)
		if weak {
			if prompt != "" && !strings.Contains(got, "\x1b]0;PWNED") {
				t.Fatalf("with --allow-write-host-exec git's prompt did not print the session's escape (%q), so this test proves nothing", got)
			}
			continue
		}
		if strings.ContainsAny(got, "\x1b\x07") {
			t.Errorf("git's prompt printed the session's escape: %q", got)
		}
		if head := filepath.Join(ws, ".git", "HEAD"); !strings.Contains(r.stderr, head) || !strings.Contains(r.stderr, "moved aside") {
			t.Errorf("run did not say it moved %s aside:\n%s", head, r.stderr)
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
		args := []string{"run", "-w", ws}
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

// TestOptionNamesInWorkspace: a file name a shell's * gives a command as
// an option: the session made `--checkpoint=1` and
// `--checkpoint-action=exec=sh s.sh`, and the user's `tar cf backup.tar *`
// in the workspace (GNU tar) ran s.sh. With --allow-write-host-exec the
// attack works; by default both names are moved aside (to names without a
// leading -) and said, and tar runs nothing.
func TestOptionNamesInWorkspace(t *testing.T) {
	needRig(t)
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("no tar here")
	}
	for _, weak := range []bool{true, false} {
		ws := workspace(t)
		time.Sleep(1100 * time.Millisecond)
		mark := filepath.Join(ws, "MARK")
		args := []string{"run", "-w", ws}
		if weak {
			args = append(args, "--allow-write-host-exec")
		}
		r := mustMosaic(t, append(args, "--", "sh", "-c", "echo 'touch "+mark+"' > s.sh && touch -- --checkpoint=1 '--checkpoint-action=exec=sh s.sh'")...)
		os.Remove(mark)
		cmd := exec.Command("sh", "-c", "tar cf "+filepath.Join(t.TempDir(), "backup.tar")+" *")
		cmd.Dir = ws
		cmd.Run()
		_, err := os.Stat(mark)
		if weak {
			if err != nil {
				t.Fatalf("with --allow-write-host-exec the host's tar cf backup.tar * did not run s.sh, so this test proves nothing\n%s", r.stderr)
			}
			continue
		}
		if err == nil {
			t.Error("the host's tar cf backup.tar * ran the command the session's file names gave it")
		}
		if !strings.Contains(r.stderr, "--checkpoint-action") || !strings.Contains(r.stderr, "moved aside") {
			t.Errorf("run did not say it moved the option-like names aside:\n%s", r.stderr)
		}
	}
}

// TestCommandNamesInWorkspace (issue 31, atk6): names a shell's * gives a
// command as other than a file, past "-": the session made `+!touch>MARK`
// and `@opts` (whose opts names gcc's -wrapper), and the user's `vim *`
// and `gcc -c *` in the workspace ran them; and `z -e '1e touch sed-ran'`,
// which `find ... | xargs sed -i s/a/b/` split into sed's -e and ran. With --allow-write-host-exec
// (and against main) the attack works; by default both are moved aside and
// said, and neither runs.
func TestCommandNamesInWorkspace(t *testing.T) {
	needRig(t)
	for _, tool := range []string{"vim", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here", tool)
		}
	}
	plant := `touch '+!touch>vim-ran' @opts "z -e '1e touch sed-ran'" && echo a > a.txt && echo 'int main(void) { return 0; }' > a.c && echo '-wrapper /bin/sh,-c,touch${IFS}gcc-ran;exec${IFS}"$0"${IFS}"$@"' > opts`
	for _, weak := range []bool{true, false} {
		ws := workspace(t)
		time.Sleep(1100 * time.Millisecond)
		args := []string{"run", "-w", ws}
		if weak {
			args = append(args, "--allow-write-host-exec")
		}
		r := mustMosaic(t, append(args, "--", "sh", "-c", plant)...)
		cmd := exec.Command("sh", "-c", "echo | vim -u NONE -i NONE -es *; gcc -c * 2>/dev/null; find . -name '*.txt' -o -name 'z *' | xargs sed -i s/a/b/ 2>/dev/null")
		cmd.Dir = ws
		cmd.Run()
		var ran []string
		for _, mark := range []string{"vim-ran", "gcc-ran", "sed-ran"} {
			if _, err := os.Stat(filepath.Join(ws, mark)); err == nil {
				ran = append(ran, mark)
			}
		}
		if weak {
			if len(ran) != 3 {
				t.Fatalf("with --allow-write-host-exec only %v ran, so this test proves nothing\n%s", ran, r.stderr)
			}
			continue
		}
		if len(ran) > 0 {
			t.Errorf("the host's vim * or gcc -c * ran what the session's names gave them: %v", ran)
		}
		if !strings.Contains(r.stderr, "@opts") || !strings.Contains(r.stderr, "moved aside") {
			t.Errorf("run did not say it moved the command-like names aside:\n%s", r.stderr)
		}
	}
}

// TestHookMissingScriptInTree (issue 31, atk6): a hook that leads to a file
// of the tree that is not there yet, a local override's `[ -x
// tools/pre-commit.local ] && exec tools/pre-commit.local` or a dangling
// `ln -s ../../tools/commit-msg .git/hooks/`, was not protected (only the
// files that existed were): the session made both, and the user's next git
// commit ran them. With --allow-write-host-exec (and against main) the
// attack works; by default both are moved aside when the session ends.
func TestHookMissingScriptInTree(t *testing.T) {
	needRig(t)
	for _, weak := range []bool{true, false} {
		ws := workspace(t)
		gitSetup(t, ws, "init", "-q")
		writeFiles(t, ws, map[string]string{"tools/README": "hooks\n",
			".git/hooks/pre-commit": "#!/bin/sh\n[ -x tools/pre-commit.local ] && exec tools/pre-commit.local\nexit 0\n"})
		os.Chmod(filepath.Join(ws, ".git", "hooks", "pre-commit"), 0o755)
		if err := os.Symlink("../../tools/commit-msg", filepath.Join(ws, ".git", "hooks", "commit-msg")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
		args := []string{"run", "-w", ws}
		if weak {
			args = append(args, "--allow-write-host-exec")
		}
		r := mosaic(t, append(args, "--", "sh", "-c", "for h in pre-commit.local commit-msg; do printf '#!/bin/sh\\ntouch \"$(git rev-parse --show-toplevel)/ran-'$h'\"\\n' > tools/$h; chmod +x tools/$h; done")...)
		gitSetup(t, ws, "commit", "-q", "--allow-empty", "-m", "x")
		var ran []string
		for _, h := range []string{"pre-commit.local", "commit-msg"} {
			if _, err := os.Stat(filepath.Join(ws, "ran-"+h)); err == nil {
				ran = append(ran, h)
			}
		}
		if weak {
			if len(ran) != 2 {
				t.Fatalf("with --allow-write-host-exec the host's git commit ran only %v of the session's scripts, so this test proves nothing\n%s", ran, r.stderr)
			}
			continue
		}
		if len(ran) > 0 || !strings.Contains(r.stderr, "tools/commit-msg") {
			t.Errorf("the host's git commit ran the session's %v, or the end did not move them aside\n%s", ran, r.stderr)
		}
	}
}

// TestVenvLauncherKept (tidy): the user's .envrc sources .venv's activate,
// and the agent built the venv: the launchers pip writes there (pip3,
// #! naming the venv's python) shadow the host's, and every such session's
// end moved them aside, breaking the user's pip. They stay now, as the
// venv's python link does. A bin/git the session dressed up as a venv
// launcher (pyvenv.cfg beside it, #! naming its python) in a directory
// the .envrc puts on PATH is moved aside all the same (the prompt runs
// git); with --allow-write-host-exec it stays, so that is mosaic's doing.
func TestVenvLauncherKept(t *testing.T) {
	needRig(t)
	pip := "env" // a host program a launcher of that name would shadow
	for _, p := range []string{"pip3", "pip", "pytest"} {
		if _, err := exec.LookPath(p); err == nil {
			pip = p
			break
		}
	}
	t.Logf("the venv's launcher is named %s, a program of the host", pip)
	for _, weak := range []bool{true, false} {
		ws := workspace(t)
		writeFiles(t, ws, map[string]string{".envrc": "source .venv/bin/activate\nPATH_add evil/bin\n",
			".venv/pyvenv.cfg": "home = /usr/bin\n", ".venv/bin/activate": "export VIRTUAL_ENV=x\n"})
		time.Sleep(1100 * time.Millisecond)
		args := []string{"run", "-w", ws}
		if weak {
			args = append(args, "--allow-write-host-exec")
		}
		launcher := func(v string) string {
			return `printf '#!` + filepath.Join(ws, v, "bin", "python3") + `\nimport sys\nfrom pip._internal.cli.main import main\nsys.exit(main())\n'`
		}
		r := mustMosaic(t, append(args, "--", "sh", "-c", "set -e; ln -s /usr/bin/python3 .venv/bin/python3; "+launcher(".venv")+" > .venv/bin/"+pip+"; chmod +x .venv/bin/"+pip+
			"; mkdir -p evil/bin; echo 'home = /usr/bin' > evil/pyvenv.cfg; "+launcher("evil")+" > evil/bin/git; chmod +x evil/bin/git")...)
		if _, err := os.Stat(filepath.Join(ws, ".venv", "bin", pip)); err != nil || strings.Contains(r.stderr, filepath.Join(ws, ".venv", "bin", pip)) {
			t.Errorf("the venv's own %s launcher was moved aside (%v):\n%s", pip, err, r.stderr)
		}
		_, err := os.Lstat(filepath.Join(ws, "evil", "bin", "git"))
		if weak {
			if err != nil {
				t.Fatalf("with --allow-write-host-exec evil/bin/git is gone (%v), so this test proves nothing", err)
			}
			continue
		}
		if err == nil || !strings.Contains(r.stderr, filepath.Join(ws, "evil", "bin", "git")) {
			t.Errorf("evil/bin/git, dressed up as a venv launcher, is still there (%v), or run did not say it moved it aside:\n%s", err, r.stderr)
		}
	}
}
