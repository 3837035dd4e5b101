package directfloor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"mosaic/sandbox"
)

// stowHome makes a home whose configuration places link into the dotfiles
// repository ws as GNU stow leaves them (relative links, a folded
// directory), beside links that must be left alone, and returns it.
func stowHome(t *testing.T, ws string) string {
	t.Helper()
	home, _ := filepath.EvalSymlinks(t.TempDir())
	for _, f := range []string{"ssh/config", "aws/config", "systemd/u.service", "envd/path.conf", "nvim/init.lua", "bin/tool", "gnupg/gpg-agent.conf", "kube/config", "cache/x", "README"} {
		os.MkdirAll(filepath.Join(ws, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(ws, f), []byte("the user's\n"), 0o644)
	}
	links := map[string]string{
		".ssh/config":                     "ssh/config",
		".aws/config":                     "aws/config",
		".config/systemd/user/u.service":  "systemd/u.service",
		".config/environment.d/path.conf": "envd/path.conf",
		".config/nvim":                    "nvim", // a folded directory
		"bin/tool":                        "bin/tool",
		".gnupg/gpg-agent.conf":           "gnupg/gpg-agent.conf",
		".kube/config":                    "kube/config",
		".cache/x":                        "cache/x", // a cache: not looked at
		"projects":                        ".",       // the top's projects, not configuration
		".wine/dosdevices/z:":             "/",       // above the home: no configuration of the workspace's
		".local/share/applications/a/b/c": "README",  // deeper than stow puts a link
	}
	for l, target := range links {
		p := filepath.Join(home, l)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if !filepath.IsAbs(target) {
			rel, _ := filepath.Rel(filepath.Dir(p), filepath.Join(ws, target))
			target = rel
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

// TestHomeLinksReadOnly (issue 38/40): a dotfiles repository linked into
// the home as stow does: what the home's configuration links lead to in
// the workspace is bound read-only, with the link named, and nothing else
// of it; a cache, the top's project links, a link above the home and one
// deeper than stow links are left alone.
func TestHomeLinksReadOnly(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	home := stowHome(t, ws)
	binds, _, err := Protect(ws, home)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, b := range binds {
		if b.Kind == sandbox.KindRO {
			reasons[strings.TrimPrefix(b.Dst, ws+"/")] = b.Reason
		}
	}
	for rel, link := range map[string]string{"ssh/config": "~/.ssh/config", "aws/config": "~/.aws/config", "systemd/u.service": "~/.config/systemd/user/u.service",
		"envd/path.conf": "~/.config/environment.d/path.conf", "nvim": "~/.config/nvim", "bin/tool": "~/bin/tool", "gnupg/gpg-agent.conf": "~/.gnupg/gpg-agent.conf", "kube/config": "~/.kube/config"} {
		if !strings.Contains(reasons[rel], link) {
			t.Errorf("%s, which %s leads to, is not read-only with its link named: %q", rel, link, reasons[rel])
		}
	}
	for _, rel := range []string{"cache/x", "README"} {
		if _, ok := reasons[rel]; ok {
			t.Errorf("%s is read-only", rel)
		}
	}
	// The directories on the way are pinned: the session cannot move
	// ssh/ aside and make another.
	pinned := false
	for _, b := range binds {
		pinned = pinned || b.Kind == sandbox.KindRW && b.Dst == filepath.Join(ws, "ssh")
	}
	if !pinned {
		t.Errorf("ssh/ is not pinned: %+v", binds)
	}
}

// TestHomeLinksRefused: a home link that no bind can cover refuses the
// workspace, naming it: one whose target in the workspace is missing (the
// session would make it), one to the workspace itself (~/.config/nvim ->
// the nvim repository the session writes), and a home too big to look
// through.
func TestHomeLinksRefused(t *testing.T) {
	parent, _ := filepath.EvalSymlinks(t.TempDir())
	ws := filepath.Join(parent, "dots")
	os.Mkdir(ws, 0o755)
	for _, c := range []struct{ link, target, want string }{
		{".aws/credentials", filepath.Join(ws, "aws", "credentials"), "does not exist"},
		{".config/nvim", ws, "holds the workspace"},
		{".config/x", filepath.Dir(ws), "holds the workspace"},
	} {
		home, _ := filepath.EvalSymlinks(t.TempDir())
		os.MkdirAll(filepath.Join(home, filepath.Dir(c.link)), 0o755)
		os.Symlink(c.target, filepath.Join(home, c.link))
		_, _, err := Protect(ws, home)
		if err == nil || !strings.Contains(err.Error(), "~/"+c.link) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "clone mode") {
			t.Errorf("%s -> %s: %v", c.link, c.target, err)
		}
	}
	defer func(n int) { homeLinkBudget = n }(homeLinkBudget)
	homeLinkBudget = 5
	home := stowHome(t, ws)
	if _, _, err := Protect(ws, home); err == nil || !strings.Contains(err.Error(), "over 5 entries") {
		t.Errorf("over the budget: %v", err)
	}
}

// TestAgentConfigsReadOnly (issue 40): the agents' project configurations
// a host agent loads and runs are read-only whole when they exist
// (.claude/agents and skills, .lsp.json, Codex's, Copilot's, ...), so that
// no file can be added to them either; a missing .claude is an empty
// read-only placeholder.
func TestAgentConfigsReadOnly(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	for _, f := range []string{".claude/agents/rev.md", ".claude/skills/s/SKILL.md", ".lsp.json", ".codex/config.toml", ".agents/skills/s/SKILL.md", ".github/agents/a.agent.md", ".github/workflows/ci.yml", ".gemini/commands/c.toml", ".cursor/hooks.json"} {
		os.MkdirAll(filepath.Join(ws, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(ws, f), nil, 0o644)
	}
	ro := readOnlyRels(t, ws)
	for _, want := range []string{".claude", ".lsp.json", ".codex", ".agents", ".github/agents", ".gemini", ".cursor"} {
		if !slices.Contains(ro, want) {
			t.Errorf("%s is not read-only: %v", want, ro)
		}
	}
	if slices.Contains(ro, ".github") || slices.Contains(ro, ".github/workflows") {
		t.Errorf(".github's workflows, which run on GitHub, not the host, are read-only: %v", ro)
	}
	bare, _ := filepath.EvalSymlinks(t.TempDir())
	if ro := readOnlyRels(t, bare); !slices.Contains(ro, ".claude") {
		t.Errorf("no .claude placeholder: %v", ro)
	}
	if st, err := os.Lstat(filepath.Join(bare, ".claude")); err != nil || !st.IsDir() {
		t.Errorf("the .claude placeholder: %v", err)
	}
}

// BenchmarkHomeLinks measures the look through the home mosaic runs in
// (MOSAIC_BENCH_HOME, else $HOME) for links into a workspace.
func BenchmarkHomeLinks(b *testing.B) {
	home := os.Getenv("MOSAIC_BENCH_HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	ws := b.TempDir()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := homeLinkEntries(home, ws); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "µs/look")
}
