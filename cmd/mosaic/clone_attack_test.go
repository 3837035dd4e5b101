package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// newFilePatch is git's patch of a new file at path.
func newFilePatch(path, mode, line string) string {
	return "diff --git a/" + path + " b/" + path + "\nnew file mode " + mode + "\n--- /dev/null\n+++ b/" + path + "\n@@ -0,0 +1 @@\n+" + line + "\n"
}

// TestCloneHostileOutputs: what a finish step wrote is the session's
// (it ran the agent's git config, as confined as the agent): hand-made
// patches and bundles that reach .git in any spelling, a gitlink, a
// symlink and a write through it, a huge patch, a bundle whose ref points
// elsewhere and a corrupt bundle are each refused by apply (exit 3,
// change-refused) with nothing changed in the checkout: no file, no branch.
func TestCloneHostileOutputs(t *testing.T) {
	needRig(t)
	ws := cloneRepo(t)
	os.Symlink("/tmp", filepath.Join(ws, "userlink")) // the user's own symlink, leading out
	name := cloneSession(t)
	mustMosaic(t, "run", "--clone", "--name", name, "-w", ws, "--", "sh", "-c", "echo x > new.txt")
	out := filepath.Join(stateRoot(), "sessions", name+"-finish", "home", "out")
	realPatch, err := os.ReadFile(filepath.Join(out, "patch"))
	if err != nil || !strings.Contains(string(realPatch), "new.txt") {
		t.Fatalf("the finish step's patch: %v %q", err, realPatch)
	}
	realBundle, _ := os.ReadFile(filepath.Join(out, "bundle"))
	status := func() string {
		return gitMust(t, ws, "status", "--porcelain", "--ignored") + gitMust(t, ws, "branch", "--list") + gitMust(t, ws, "for-each-ref")
	}
	before := status()
	check := func(t *testing.T, args ...string) {
		t.Helper()
		r := mosaic(t, append([]string{"apply", "--json"}, args...)...)
		if code, msg := jsonError(t, r); r.code != 3 || code != "change-refused" {
			t.Errorf("apply %v: exit %d %s: %s %s", args, r.code, code, msg, r.stderr)
		}
		if after := status(); after != before {
			t.Errorf("a refused apply changed the checkout:\n%s\n%s", before, after)
		}
		for _, p := range []string{".git/hooks/x", "escape", ".git/config.bak", "sub"} {
			if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
				t.Errorf("%s appeared", p)
			}
		}
	}
	huge := "diff --git a/big b/big\nnew file mode 100644\n--- /dev/null\n+++ b/big\n@@ -0,0 +1 @@\n+" + strings.Repeat("x", 65<<20) + "\n"
	for what, patch := range map[string]string{
		"dotdot":             newFilePatch("../escape", "100644", "x"),
		"hooks":              newFilePatch(".git/hooks/x", "100755", "touch /tmp/pwned"),
		".GIT/config":        newFilePatch(".GIT/config", "100644", "[core]"),
		"ntfs short name":    newFilePatch("GIT~1/config", "100644", "[core]"),
		"symlink out":        newFilePatch("escape", "120000", "../../.."),
		"write through link": newFilePatch("lnk", "120000", "sub") + newFilePatch("lnk/x", "100644", "x"),
		"through user link":  newFilePatch("userlink/x", "100644", "x"),
		"gitlink":            "diff --git a/sub b/sub\nnew file mode 160000\n--- /dev/null\n+++ b/sub\n@@ -0,0 +1 @@\n+Subproject commit 1111111111111111111111111111111111111111\n",
		"huge":               huge,
	} {
		t.Run(strings.ReplaceAll(what, " ", "-"), func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(out, "patch"), []byte(patch), 0o644); err != nil {
				t.Fatal(err)
			}
			check(t, name)
		})
	}
	os.WriteFile(filepath.Join(out, "patch"), realPatch, 0o644)
	head, _ := os.ReadFile(filepath.Join(out, "head"))
	// A bundle of the user's own branch, and one naming the snapshot's ref at another commit.
	elsewhere := filepath.Join(t.TempDir(), "b")
	gitMust(t, ws, "bundle", "create", elsewhere, "HEAD")
	other, _ := os.ReadFile(elsewhere)
	parent := strings.TrimSpace(gitMust(t, ws, "rev-parse", "HEAD"))
	redirected := strings.Replace(string(realBundle), strings.TrimSpace(string(head))+" refs/mosaic/snapshot", parent+" refs/mosaic/snapshot", 1)
	hdrEnd := strings.Index(string(realBundle), "\n\n") + 2
	corrupt := string(realBundle[:hdrEnd]) + "PACK" + strings.Repeat("\x00garbage", 64)
	for what, bundle := range map[string]string{"ref elsewhere": string(other), "ref at another commit": redirected, "corrupt": corrupt, "not a bundle": "hello\n"} {
		t.Run(strings.ReplaceAll(what, " ", "-"), func(t *testing.T) {
			os.WriteFile(filepath.Join(out, "bundle"), []byte(bundle), 0o644)
			check(t, "--branch", name)
		})
	}
	// The real outputs still apply, both ways.
	os.WriteFile(filepath.Join(out, "bundle"), realBundle, 0o644)
	mustMosaic(t, "apply", "--branch", name)
	if got := gitMust(t, ws, "show", "mosaic/"+name+":new.txt"); got != "x\n" {
		t.Errorf("the branch's new.txt: %q", got)
	}
}

// TestCloneSymlinkOutWeakened: a finish step's patch that makes a symlink
// leading out of the repository is applied by git apply itself (a weakened
// mosaic, whose checks accept everything, writes it into the checkout),
// and refused by mosaic's checks with nothing changed.
func TestCloneSymlinkOutWeakened(t *testing.T) {
	needRig(t)
	weak := weakenedMosaic(t)
	for _, build := range []string{weak, mosaicBin} {
		ws := cloneRepo(t)
		name := cloneSession(t)
		mustMosaic(t, "run", "--clone", "--name", name, "-w", ws, "--", "true")
		out := filepath.Join(stateRoot(), "sessions", name+"-finish", "home", "out")
		os.WriteFile(filepath.Join(out, "patch"), []byte(newFilePatch("escape", "120000", "../../../.ssh")), 0o644)
		cmd := exec.Command(build, "apply", name, "--json")
		r := runResult(t, cmd)
		_, err := os.Lstat(filepath.Join(ws, "escape"))
		if build == weak {
			if r.code != 0 || err != nil {
				t.Fatalf("the weakened build did not write the symlink (exit %d %s %s, %v): this test proves nothing", r.code, r.stdout, r.stderr, err)
			}
			continue
		}
		if code, _ := jsonError(t, r); r.code != 3 || code != "change-refused" || err == nil {
			t.Errorf("mosaic applied a symlink leading out: exit %d %s, %v", r.code, r.stdout, err)
		}
	}
}

// TestCloneSymlinkRetargetWeakened: an agent that retargets a symlink the
// repository already has (ln -sfn /etc/passwd link) gets from the finish
// step's own git diff a patch without a mode line (only the index line says
// 120000): a weakened mosaic applies it, the user's checkout then has a
// symlink leading out; mosaic refuses it, nothing changed.
func TestCloneSymlinkRetargetWeakened(t *testing.T) {
	needRig(t)
	weak := weakenedMosaic(t)
	for _, build := range []string{weak, mosaicBin} {
		ws := cloneRepo(t)
		os.Symlink("a.txt", filepath.Join(ws, "link"))
		gitMust(t, ws, "add", "link")
		gitMust(t, ws, "commit", "-qm", "link")
		name := cloneSession(t)
		mustMosaic(t, "run", "--clone", "--name", name, "-w", ws, "--", "ln", "-sfn", "/etc/passwd", "link")
		r := runResult(t, exec.Command(build, "apply", name, "--json"))
		got, _ := os.Readlink(filepath.Join(ws, "link"))
		if build == weak {
			if r.code != 0 || got != "/etc/passwd" {
				t.Fatalf("the weakened build did not retarget the symlink (exit %d %s %s, link %q): this test proves nothing", r.code, r.stdout, r.stderr, got)
			}
			continue
		}
		if code, _ := jsonError(t, r); r.code != 3 || code != "change-refused" || got != "a.txt" {
			t.Errorf("mosaic retargeted the checkout's symlink out: exit %d %s, link %q", r.code, r.stdout, got)
		}
	}
}

// plants are, by kind, each way a repository makes the user's git run a
// command (each touching mark.KIND), as a session plants them: an
// include.path target in the workspace with core.fsmonitor, hooks in
// .git/hooks and in a core.hooksPath directory, a .gitattributes filter
// with its config, core.sshCommand, a linked worktree's commondir pointing
// at a copied .git whose config has an fsmonitor, a nested repository with
// an fsmonitor.
func plants(mark string) map[string]string {
	return map[string]string{
		"include": `printf '[core]\n\tfsmonitor = "touch ` + mark + `.include; false"\n' > inc.cfg
git config include.path ../inc.cfg`,
		"hook": `mkdir -p .git/hooks; for h in pre-commit post-commit; do printf '#!/bin/sh\ntouch ` + mark + `.hook\n' > .git/hooks/$h; chmod +x .git/hooks/$h; done`,
		"hookspath": `mkdir -p .githooks && printf '#!/bin/sh\ntouch ` + mark + `.hookspath\n' > .githooks/pre-commit && chmod +x .githooks/pre-commit
git config core.hooksPath .githooks`,
		"filter": `echo '*.txt filter=evil' > .gitattributes
git config filter.evil.clean "touch ` + mark + `.filter; cat"
git config filter.evil.smudge "touch ` + mark + `.filter; cat"`,
		"ssh": `git config core.sshCommand "touch ` + mark + `.ssh; false"`,
		"commondir": `mkdir -p evil && cp -r .git/objects .git/refs .git/HEAD evil/
printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch ` + mark + `.commondir; false"\n' > evil/config
echo ../evil > .git/commondir`,
		"nested": `git init -q src && git -C src config core.fsmonitor "touch ` + mark + `.nested; false"
echo x > src/f && git -C src add f && git -C src -c user.name=a -c user.email=a@b commit -qm nested`,
	}
}

// hostTools runs in ws what the user runs there: git status, diff, log -p,
// a commit, a fetch over ssh (to a closed loopback port), and in src the same.
func hostTools(ws string) {
	for _, args := range [][]string{{"status"}, {"diff"}, {"log", "-p", "-3"}, {"add", "-A"}, {"-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "host", "--allow-empty"},
		{"-c", "protocol.ssh.allow=always", "ls-remote", "ssh://127.0.0.1:1/x"}, {"-C", "src", "status"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GIT_SSH_VARIANT=ssh")
		cmd.Run()
	}
}

// TestClonePlants: each plant that, made in direct mode with
// --allow-write-host-exec, runs the session's command in the user's own git
// on the host (status, diff, log -p, commit, an ssh fetch) is made in a
// clone-mode session instead, then mosaic diff, mosaic apply (worktree or
// --branch, the branch then checked out) and the same git in the
// checkout: no mark exists. The nested repository is a gitlink, refused.
func TestClonePlants(t *testing.T) {
	needRig(t)
	marks := t.TempDir() // the host's /tmp: a session's /tmp is its own
	mark := filepath.Join(marks, "m")
	ran := func(kind string) bool {
		_, err := os.Stat(mark + "." + kind)
		return err == nil
	}
	all := plants(mark)
	for kind, script := range all {
		ws := cloneRepo(t)
		mustMosaic(t, "run", "--direct", "-w", ws, "--allow-write-host-exec", "--", "sh", "-c", "set -e\n"+script)
		hostTools(ws)
		if !ran(kind) {
			t.Fatalf("in direct mode with --allow-write-host-exec the %s plant did not run on the host: this test proves nothing", kind)
		}
		os.Remove(mark + "." + kind)
	}

	ws := cloneRepo(t)
	how := map[string]string{"include": "", "hook": "", "hookspath": "--branch", "filter": "", "ssh": "", "commondir": "--branch", "nested": "refused"}
	var branches []string
	for kind, script := range all {
		name := cloneSession(t)
		mustMosaic(t, "run", "--clone", "--name", name, "-w", ws, "--", "sh", "-c", "set -e\n"+script)
		mustMosaic(t, "diff", name)
		mustMosaic(t, "diff", name, "--stat")
		switch how[kind] {
		case "refused":
			if r := mosaic(t, "apply", name, "--json"); r.code != 3 || !strings.Contains(r.stdout, "gitlink") {
				t.Errorf("%s: not refused as a gitlink: exit %d %s", kind, r.code, r.stdout)
			}
		case "--branch":
			mustMosaic(t, "apply", "--branch", name)
			branches = append(branches, "mosaic/"+name)
		default:
			mustMosaic(t, "apply", name)
		}
		hostTools(ws)
	}
	for _, b := range branches {
		gitMust(t, ws, "checkout", "-q", b, "--", ".")
		hostTools(ws)
	}
	for kind := range all {
		if ran(kind) {
			t.Errorf("clone mode: the host's git ran the session's %s plant", kind)
		}
	}
	for _, p := range []string{".git/commondir", ".git/hooks/pre-commit", "src"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s is in the user's checkout", p)
		}
	}
}
