package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReadEnvrc: what an .envrc has direnv take from the workspace: the
// files it sources or evaluates and the directories it puts on PATH,
// relative to the .envrc's directory; paths with a variable or outside
// the workspace are not named; a line's commands after its first (a
// one-line if, a &&, a ;) are read too.
func TestReadEnvrc(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "sub", ".direnv", "python-3.11.2", "bin"), 0o755)
	os.MkdirAll(filepath.Join(ws, "sub", ".direnv", "other"), 0o755)
	os.WriteFile(filepath.Join(ws, "sub", ".envrc"), []byte(`source .venv/bin/activate
. "./env.sh"
use nix
use flake
PATH_add bin "tools/bin" $HOME/x ../../outside
path_add PATH scripts
path_add PYTHONPATH lib
layout node
layout python3
source $HOME/y
export PATH="$PWD/exported/bin:$PATH"
PATH=${PWD}/plain:$PATH
source "$PWD/pwd.sh"
if [ -f cond.sh ]; then source cond.sh; fi
test -d cbin && PATH_add cbin # PATH_add commented
has nix || dotenv .env.local; PATH_add after
`), 0o644)
	r := readEnvrc(ws, "sub")
	rel := func(ps []string) []string {
		var out []string
		for _, p := range ps {
			out = append(out, strings.TrimPrefix(p, ws+"/"))
		}
		slices.Sort(out)
		return out
	}
	wantLoads := []string{"sub/.env.local", "sub/.venv/bin/activate", "sub/cond.sh", "sub/default.nix", "sub/env.sh", "sub/flake.lock", "sub/flake.nix", "sub/pwd.sh", "sub/shell.nix"}
	if got := rel(r.loads); !slices.Equal(got, wantLoads) {
		t.Errorf("loads %v, want %v", got, wantLoads)
	}
	wantPath := []string{"sub/.direnv/python-3.11.2/bin", "sub/.direnv/virtualenv/bin", "sub/.venv/bin", "sub/after", "sub/bin", "sub/cbin", "sub/exported/bin", "sub/node_modules/.bin", "sub/plain", "sub/scripts", "sub/tools/bin"}
	if got := rel(r.path); !slices.Equal(got, wantPath) {
		t.Errorf("PATH %v, want %v", got, wantPath)
	}
	if got := envrcLoads(ws); len(got) != 0 {
		t.Errorf("the top has no .envrc, yet loads %v", got)
	}
}

// TestMoveAsideShadows: in a directory an .envrc puts on PATH, what the
// session made that shadows a program of the host (git, ls, python) is
// moved aside at its end, at the top and below it (and a Go toolchain's
// name, which any go command looks up on PATH for a go.mod's toolchain); a program only the
// project has, a link to a system program (a venv's python), and what was
// there before stay. A sourced file changed below the top is moved too.
func TestMoveAsideShadows(t *testing.T) {
	t.Setenv("PATH", "/usr/bin:/bin")
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, ".envrc"), []byte("PATH_add bin\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, "bin"), 0o755)
	os.WriteFile(filepath.Join(ws, "bin", "cat"), []byte("#!/bin/sh\n"), 0o755) // the user's, before
	os.MkdirAll(filepath.Join(ws, "web", "node_modules", ".bin"), 0o755)
	os.WriteFile(filepath.Join(ws, "web", ".envrc"), []byte("layout node\nsource env.sh\n"), 0o644)
	start := sessionStart()
	for _, p := range []string{"bin/git", "bin/projtool", "bin/go1.99.1", "web/node_modules/.bin/ls", "web/node_modules/.bin/mosaic-test-projlint", "web/env.sh"} { // a name no host has (Debian 13 has an eslint)
		os.WriteFile(filepath.Join(ws, p), []byte("#!/bin/sh\ntouch MARK\n"), 0o755)
	}
	os.MkdirAll(filepath.Join(ws, "lib", "evil"), 0o755)
	os.WriteFile(filepath.Join(ws, "lib", "evil", "git"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(ws, ".envrc"), []byte("PATH_add bin\nPATH_add linked\n"), 0o644)
	os.Symlink("lib/evil", filepath.Join(ws, "linked")) // the session's: the directory itself is moved
	if os.Geteuid() != 0 {                              // root can write /bin/sh: the link would be its to change
		os.Symlink("/bin/sh", filepath.Join(ws, "bin", "python3"))
	}
	got := map[string]string{}
	for _, m := range MoveAsideRepos(ws, "s", start) {
		if m.To == "" || m.Error != "" {
			t.Errorf("not moved: %+v", m)
		}
		got[m.Path] = m.Why()
	}
	for _, want := range []string{"bin/git", "bin/go1.99.1", "linked", "web/node_modules/.bin/ls", "web/env.sh"} {
		if _, ok := got[want]; !ok {
			t.Errorf("%s not moved aside: %v", want, got)
		}
	}
	if len(got) != 5 {
		t.Errorf("moved %v, want only bin/git, bin/go1.99.1, linked, web/node_modules/.bin/ls and web/env.sh", got)
	}
	if !strings.Contains(got["bin/git"], "PATH") {
		t.Errorf("reason %q", got["bin/git"])
	}
}

// TestRebaseTodoMovedAside: an in-progress rebase's todo that changed
// while the session ran (git runs its exec lines at git rebase
// --continue) is moved aside, in the workspace's repository and in a
// nested one.
func TestRebaseTodoMovedAside(t *testing.T) {
	ws := t.TempDir()
	for _, gd := range []string{".git", "sub/.git"} {
		os.MkdirAll(filepath.Join(ws, gd, "rebase-merge"), 0o755)
		os.WriteFile(filepath.Join(ws, gd, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	}
	start := sessionStart()
	for _, gd := range []string{".git", "sub/.git"} {
		os.WriteFile(filepath.Join(ws, gd, rebaseTodo), []byte("exec touch MARK\n"), 0o644)
	}
	got := map[string]string{}
	for _, m := range MoveAsideRepos(ws, "s", start) {
		got[m.Path] = m.Why()
	}
	if _, ok := got[".git/"+rebaseTodo]; !ok || !strings.Contains(got[".git/"+rebaseTodo], "rebase --continue") {
		t.Errorf("the top's todo not moved aside with its reason: %v", got)
	}
	if _, ok := got["sub/.git"]; !ok {
		t.Errorf("the nested repository whose todo changed not moved aside: %v", got)
	}
}

// TestVenvPipConfMovedAside: a virtual environment's pip.conf, which pip
// there reads over the user's own config, made by the session is moved
// aside; one older than the session stays.
func TestVenvPipConfMovedAside(t *testing.T) {
	ws := t.TempDir()
	for _, v := range []string{".venv", "old/venv"} {
		os.MkdirAll(filepath.Join(ws, v), 0o755)
		os.WriteFile(filepath.Join(ws, v, "pyvenv.cfg"), []byte("home = /usr/bin\n"), 0o644)
	}
	os.WriteFile(filepath.Join(ws, "old/venv/pip.conf"), nil, 0o644)
	start := sessionStart()
	os.WriteFile(filepath.Join(ws, ".venv", "pip.conf"), []byte("[global]\nindex-url = http://x/simple\n"), 0o644)
	moved := MoveAsideRepos(ws, "s", start)
	if len(moved) != 1 || moved[0].Path != ".venv/pip.conf" || moved[0].To == "" || !strings.Contains(moved[0].Why(), "index-url") {
		t.Errorf("moved %+v", moved)
	}
}

// TestPromptBytesMovedAside: a HEAD or a rebase's head-name that the
// session wrote with an escape sequence (git's prompt prints them raw) is
// moved aside; a HEAD it changed to another valid branch stays.
func TestPromptBytesMovedAside(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git", "rebase-merge"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	start := sessionStart()
	os.WriteFile(filepath.Join(ws, ".git", "HEAD"), []byte("ref: refs/heads/ma\x1b]0;x\x07in\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".git", "rebase-merge", "head-name"), []byte("refs/heads/\xc2\x9b31m\n"), 0o644)
	got := map[string]string{}
	for _, m := range MoveAsideRepos(ws, "s", start) {
		got[m.Path] = m.Why()
	}
	if !strings.Contains(got[".git/HEAD"], "prompt") || !strings.Contains(got[".git/rebase-merge/head-name"], "prompt") || len(got) != 2 {
		t.Errorf("moved %v", got)
	}
	os.WriteFile(filepath.Join(ws, ".git", "HEAD"), []byte("ref: refs/heads/feature-ü\n"), 0o644)
	if moved := MoveAsideRepos(ws, "s", start); len(moved) != 0 {
		t.Errorf("a valid HEAD moved: %+v", moved)
	}
}

// TestOptionNamesMovedAside: an entry whose name starts with "-" that the
// session made (tar cf a.tar * takes --checkpoint-action=exec=... as an
// option) is moved aside to a name that does not start with "-", at any
// depth; one older than the session stays.
func TestOptionNamesMovedAside(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "-old"), nil, 0o644)
	start := sessionStart()
	os.MkdirAll(filepath.Join(ws, "sub", "-rf"), 0o755)
	os.WriteFile(filepath.Join(ws, "--checkpoint-action=exec=sh s.sh"), nil, 0o644)
	got := map[string]string{}
	for _, m := range MoveAsideRepos(ws, "s", start) {
		if m.To == "" || strings.HasPrefix(filepath.Base(m.To), "-") {
			t.Errorf("moved to %q: %+v", m.To, m)
		}
		got[m.Path] = m.Why()
	}
	if _, ok := got["--checkpoint-action=exec=sh s.sh"]; !ok || len(got) != 2 || !strings.Contains(got["sub/-rf"], "option") {
		t.Errorf("moved %v", got)
	}
}

// TestCommandNamesMovedAside (issue 31, atk6): "-" is not the only lead a
// shell glob hands a command as other than a file. Shown first with main's
// check ("-" only): a `+!touch>vim-ran` the session made had the user's
// `vim *` run the command, and an `@opts` naming a -wrapper had `gcc -c *`
// run it. Both are moved aside now, to names that start with "_"; a
// SvelteKit route file (+page.svelte) and an npm scope's directory
// (node_modules/@types) the session made stay.
func TestCommandNamesMovedAside(t *testing.T) {
	for _, tool := range []string{"vim", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here", tool)
		}
	}
	for _, weak := range []bool{true, false} {
		ws := t.TempDir()
		start := sessionStart()
		for name, body := range map[string]string{
			"+!touch>vim-ran": "", "@opts": "", "z -e '1e touch sed-ran'": "", "a.txt": "a\n", "A - B.txt": "", "a.c": "int main(void) { return 0; }\n", "+page.svelte": "",
			"opts": `-wrapper /bin/sh,-c,touch${IFS}gcc-ran;exec${IFS}"$0"${IFS}"$@"` + "\n",
		} {
			os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644)
		}
		os.MkdirAll(filepath.Join(ws, "node_modules", "@types", "node"), 0o755)
		if weak {
			isOptionLike = func(name string, _ os.FileMode) bool { return strings.HasPrefix(name, "-") }
		}
		moved := MoveAsideRepos(ws, "s", start)
		isOptionLike = optionLike
		for _, c := range []string{"echo | vim -u NONE -i NONE -es *", "gcc -c * 2>/dev/null", "find . -name '*.txt' -o -name 'z *' | xargs sed -i s/a/b/ 2>/dev/null"} {
			cmd := exec.Command("sh", "-c", c)
			cmd.Dir = ws
			cmd.Run()
		}
		var ran []string
		for _, mark := range []string{"vim-ran", "gcc-ran", "sed-ran"} {
			if _, err := os.Stat(filepath.Join(ws, mark)); err == nil {
				ran = append(ran, mark)
			}
		}
		if weak {
			if len(ran) != 3 {
				t.Fatalf("with main's check only %v ran, so this test proves nothing (moved %+v)", ran, moved)
			}
			continue
		}
		got := map[string]bool{}
		for _, m := range moved {
			if m.To == "" || strings.ContainsAny(filepath.Base(m.To)[:1], "-+@") || strings.Contains(m.To, " ") {
				t.Errorf("moved to %q: %+v", m.To, m)
			}
			got[m.Path] = true
		}
		if len(ran) > 0 || !got["+!touch>vim-ran"] || !got["@opts"] || !got["z -e '1e touch sed-ran'"] || len(got) != 3 {
			t.Errorf("ran %v; moved %v", ran, got)
		}
	}
}

// TestVenvLaunchersStay: in a virtual environment an .envrc puts on PATH
// (layout python, a sourced activate), the launchers pip wrote (pip, pip3,
// an entry point; #! naming that environment's python, or pip's
// #!/bin/sh form for a long path) are the project's environment and stay,
// as do npm's links in a layout node's node_modules/.bin; what a prompt
// or cd runs unasked (git, python) is moved aside all the same, launcher
// or not, and so is a "launcher" whose #! names another python, one in a
// bin without pyvenv.cfg, and a node_modules/.bin link that leads
// elsewhere.
func TestVenvLaunchersStay(t *testing.T) {
	hostBin := t.TempDir()
	for _, p := range []string{"pip", "pip3", "pytest", "ls", "cat", "tsc", "semver", "env"} {
		os.WriteFile(filepath.Join(hostBin, p), []byte("#!/bin/sh\n"), 0o755)
	}
	t.Setenv("PATH", hostBin)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, ".envrc"), []byte("source .venv/bin/activate\nlayout python\nPATH_add fake/bin\nlayout node\n"), 0o644)
	venvs := []string{".venv", ".direnv/python-3.11"}
	for _, v := range append(venvs, "fake") {
		os.MkdirAll(filepath.Join(ws, v, "bin"), 0o755)
	}
	for _, v := range venvs {
		os.WriteFile(filepath.Join(ws, v, "pyvenv.cfg"), []byte("home = /usr/bin\n"), 0o644)
	}
	os.MkdirAll(filepath.Join(ws, "node_modules", ".bin"), 0o755)
	os.MkdirAll(filepath.Join(ws, "node_modules", "typescript", "bin"), 0o755)
	start := sessionStart()
	launcher := func(v, python string) string {
		return "#!" + filepath.Join(ws, v, "bin", python) + "\nimport sys\nfrom pip._internal.cli.main import main\nsys.exit(main())\n"
	}
	files := map[string]string{
		".venv/bin/pip":                 launcher(".venv", "python3"),
		".venv/bin/pip3":                launcher(".venv", "python"),
		".venv/bin/pytest":              "#!/bin/sh\n'''exec' \"" + filepath.Join(ws, ".venv/bin/python3.11") + "\" \"$0\" \"$@\"\n' '''\n",
		".direnv/python-3.11/bin/pip":   launcher(".direnv/python-3.11", "python3.11"),
		".venv/bin/git":                 launcher(".venv", "python3"), // runs unasked: moved
		".venv/bin/ls":                  "#!/usr/bin/python3\n",       // another python: moved
		".venv/bin/cat":                 launcher(".direnv/python-3.11", "python3"),
		".venv/bin/env":                 launcher(".venv", "python3x"),
		"fake/bin/pip":                  launcher("fake", "python3"), // no pyvenv.cfg: moved
		"node_modules/typescript/bin/x": "#!/usr/bin/env node\n",
	}
	for rel, content := range files {
		os.WriteFile(filepath.Join(ws, rel), []byte(content), 0o755)
	}
	os.Symlink("../typescript/bin/x", filepath.Join(ws, "node_modules", ".bin", "tsc"))             // npm's: stays
	os.Symlink("../../evil/semver", filepath.Join(ws, "node_modules", ".bin", "semver"))            // out of node_modules: moved
	os.Symlink("../typescript/bin/x", filepath.Join(ws, "node_modules", ".bin", "node"))            // runs unasked: moved
	os.WriteFile(filepath.Join(ws, "node_modules", ".bin", "pytest"), []byte("#!/bin/sh\n"), 0o755) // no link: moved
	got := map[string]bool{}
	for _, m := range MoveAsideRepos(ws, "s", start) {
		got[m.Path] = true
	}
	want := []string{".venv/bin/git", ".venv/bin/ls", ".venv/bin/cat", ".venv/bin/env", "fake/bin/pip",
		"node_modules/.bin/semver", "node_modules/.bin/node", "node_modules/.bin/pytest"}
	for _, w := range want {
		if !got[w] {
			t.Errorf("%s not moved aside: %v", w, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("moved %v, want only %v", got, want)
	}
	for _, stay := range []string{".venv/bin/pip", ".venv/bin/pip3", ".venv/bin/pytest", ".direnv/python-3.11/bin/pip", "node_modules/.bin/tsc"} {
		if _, err := os.Lstat(filepath.Join(ws, stay)); err != nil {
			t.Errorf("the project's launcher %s was moved: %v", stay, err)
		}
	}
}
