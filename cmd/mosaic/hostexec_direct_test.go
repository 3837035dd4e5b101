package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// directRun is the start of a `mosaic run` in direct mode on ws: with
// --direct where this mosaic has it (clone mode the default), without
// where direct mode is still the default.
func directRun(t *testing.T, ws string) []string {
	t.Helper()
	hasDirect := sync.OnceValue(func() bool {
		out, _ := exec.Command(mosaicBin, "help", "run").CombinedOutput()
		return strings.Contains(string(out), "--direct")
	})
	if hasDirect() {
		return []string{"run", "--direct", "-w", ws}
	}
	return []string{"run", "-w", ws}
}

// TestAgentConfigsDirect (issue 40): in direct mode a session rewrote
// .claude/agents/*.md (a subagent whose frontmatter carries hooks and MCP
// servers), added a subagent and a skill, and rewrote .lsp.json: all kept
// for the host's Claude Code to load. With --allow-write-host-exec each
// write goes through (what main let every direct session do); by default
// .claude is read-only whole (a placeholder where there was none) and
// .lsp.json read-only: every write fails and the files are the user's.
func TestAgentConfigsDirect(t *testing.T) {
	needRig(t)
	agent := "---\nname: rev\ndescription: reviews\n---\nReview.\n"
	attacks := map[string]string{
		".claude/agents/rev.md":       "printf -- '---\\nname: rev\\nhooks:\\n  Stop: [{hooks: [{type: command, command: touch MARK}]}]\\n---\\n' > .claude/agents/rev.md",
		".claude/agents/new.md":       "printf -- '---\\nname: new\\nmcpServers: {x: {command: touch}}\\n---\\n' > .claude/agents/new.md",
		".claude/skills/s/SKILL.md":   "mkdir -p .claude/skills/s && echo 'run ./x.sh' > .claude/skills/s/SKILL.md",
		".lsp.json":                   `echo '{"x":{"command":"touch","args":["MARK"]}}' > .lsp.json`,
		"(no .claude) .claude/s.json": "mkdir -p .claude && echo '{\"hooks\":{}}' > .claude/settings.json",
	}
	for what, attack := range attacks {
		for _, weak := range []bool{true, false} {
			ws := workspace(t)
			if !strings.HasPrefix(what, "(no .claude)") {
				writeFiles(t, ws, map[string]string{".claude/agents/rev.md": agent, ".lsp.json": "{}\n"})
			}
			before := snapshotFiles(t, ws)
			args := directRun(t, ws)
			if weak {
				args = append(args, "--allow-write-host-exec")
			}
			r := mosaic(t, append(args, "--", "sh", "-c", attack)...)
			changed := snapshotFiles(t, ws) != before
			if weak && !changed {
				t.Fatalf("%s: with --allow-write-host-exec the session's write did not land, so this test proves nothing (exit %d)\n%s", what, r.code, r.stderr)
			}
			if !weak && (changed || r.code == 0) {
				t.Errorf("%s: a direct session wrote what the host's Claude Code loads (exit %d)\n%s", what, r.code, r.stderr)
			}
		}
	}
}

// snapshotFiles is every file of ws (but an empty .claude placeholder
// directory) and its content, as one string.
func snapshotFiles(t *testing.T, ws string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		c, _ := os.ReadFile(p)
		b.WriteString(strings.TrimPrefix(p, ws) + "\x00" + string(c) + "\x00")
		return nil
	})
	return b.String()
}

// TestHomeLinksDirect (issue 38/40): a dotfiles repository linked into the
// home as GNU stow does (a relative ~/.aws/config -> ../REPO/aws/config,
// and a folded directory ~/.config/NAME -> ../REPO/cfg). A direct session
// in that repository wrote a credential_process into the host's
// ~/.aws/config and added a file to the folded directory: with
// --allow-write-host-exec it still does, read on the host through the
// home's links. By default what the links lead to is read-only: the
// writes fail and the host reads the user's files. A link into the
// workspace whose target is missing refuses the start, naming the link.
func TestHomeLinksDirect(t *testing.T) {
	needRig(t)
	home := homeDir()
	awsConfig := filepath.Join(home, ".aws", "config")
	if _, err := os.Lstat(awsConfig); err == nil {
		t.Skipf("%s exists in the rig's home: the test will not replace it", awsConfig)
	}
	folded := filepath.Join(home, ".config", "mosaic-test-"+randomHex())
	stow := func(t *testing.T, ws string) {
		writeFiles(t, ws, map[string]string{"aws/config": "[default]\nregion = eu-west-1\n", "cfg/a.conf": "A=1\n"})
		os.MkdirAll(filepath.Dir(awsConfig), 0o700)
		os.MkdirAll(filepath.Dir(folded), 0o755)
		os.Remove(awsConfig)
		os.Remove(folded)
		if err := os.Symlink(filepath.Join("..", filepath.Base(ws), "aws", "config"), awsConfig); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", filepath.Base(ws), "cfg"), folded); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Remove(awsConfig); os.Remove(folded) })
	attack := "printf 'credential_process = touch MARK\\n' >> aws/config; echo B=2 > cfg/new.conf"
	for _, weak := range []bool{true, false} {
		ws := workspace(t)
		stow(t, ws)
		args := directRun(t, ws)
		if weak {
			args = append(args, "--allow-write-host-exec")
		}
		r := mosaic(t, append(args, "--", "sh", "-c", attack)...)
		aws, _ := os.ReadFile(awsConfig) // as the host's aws reads it
		_, added := os.Stat(filepath.Join(folded, "new.conf"))
		wrote := strings.Contains(string(aws), "credential_process") || added == nil
		if weak && !wrote {
			t.Fatalf("with --allow-write-host-exec the session did not write through the home's links, so this test proves nothing (exit %d)\n%s", r.code, r.stderr)
		}
		if !weak && (wrote || r.code == 0 || strings.Contains(r.stderr, "your home's")) {
			t.Errorf("a direct session wrote the host's ~/.aws/config or ~/.config through a link into its workspace (exit %d): %q\n%s", r.code, aws, r.stderr)
		}
	}
	// A link whose target is missing: the session would make it.
	ws := workspace(t)
	stow(t, ws)
	os.Remove(filepath.Join(ws, "aws", "config"))
	r := mosaic(t, append(directRun(t, ws), "--json", "--", "true")...)
	if r.code != 2 {
		t.Fatalf("a dangling home link into the workspace: exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
	}
	if code, msg := jsonError(t, r); code != "bad-workspace" || !strings.Contains(msg, "~/.aws/config") || !strings.Contains(msg, "clone mode") {
		t.Errorf("refusal %s: %s", code, msg)
	}
}
