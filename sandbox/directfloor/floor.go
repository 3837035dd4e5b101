// Package directfloor is direct mode's floor: what a direct session (the
// opt-in that writes the user's checkout in place, --direct) gets so that
// the host's tools do not run what it writes in the files they run
// unasked. It runs on the host, in mosaic, at a session's start: it looks
// at the workspace and the user's home and returns the read-only binds
// (and placeholders) that bwrap and systemd then mount over the workspace
// (sandbox.Options.Protect, units' BindReadOnlyPaths). Nothing of it runs
// inside a session, and nothing of it looks at the workspace when the
// session ends, but for removing the empty .git placeholder a session's
// own repository was mounted over (RemoveGitPlaceholder, from the
// session-ended stage). It protects what exists at the start; clone mode,
// the default, is the way to keep the host from running anything a
// session wrote.
package directfloor

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"mosaic/internal/testhook"
	"mosaic/sandbox"
)

// Files the host later executes. A session's workspace is read-write, and
// the user's own tools run things from some of its files once the session
// has written them: `git status` runs .git/config's core.fsmonitor, `git
// commit` runs .git/hooks, an editor runs .vscode's tasks, direnv runs
// .envrc. These entries are bound read-only over the workspace bind, unless
// the session is started with --allow-write-host-exec.
//
// An entry that does not exist yet must not be creatable either. A bind
// needs a mount point on the host, so mosaic creates an empty directory
// there and binds it read-only, for .git and .git/hooks: git ignores an
// empty .git (a workspace inside a bigger repository keeps working on the
// host) and .git/hooks is git's own layout. `git init` inside a session then
// fails (the trade-off; opt out for that session); .claude likewise (an
// empty one is nothing to Claude Code). The other entries are protected
// when they exist: a placeholder would be left in every workspace and
// break the tools that expect a file there. One the session creates where
// none was is not protected: direct mode says the host's tools will run
// what the session writes, and clone mode is the way to keep them from it
// (issue 38: the end-of-session walk that moved such entries aside is gone).
// The directories holding protected entries (.git, .github) are bound onto
// themselves ("pinned"), since a mount point cannot be renamed: the session
// cannot move .git aside and write a new one.

// Entry is one protected workspace entry.
type Entry struct {
	Rel    string // relative to the workspace
	Reason string
	// Placeholder: when missing, an empty read-only directory takes its
	// place (harmless to the host's tools); otherwise a missing entry is
	// left unprotected from creation.
	Placeholder bool
}

// miseReason is why a mise config is protected.
const miseReason = "mise on the host runs the hooks (on cd), tools (path:DIR) and environment it configures, and trusts a config by its path, not its content"

// Entries are the protected entries, in bind order.
var Entries = []Entry{
	{".git", "git on the host runs what the repository's config and hooks say; a .git file points git at another repository", true},
	{".git/config", "git on the host runs core.fsmonitor, core.pager, core.sshCommand, aliases and filters from it", false},
	{".git/hooks", "git on the host runs its hooks (pre-commit, post-checkout, ...)", true},
	{".gitmodules", "submodule URLs and paths that the host's git fetches and checks out", false},
	{".vscode", "VS Code runs the tasks, launchers and tool paths it configures", false},
	{".idea", "JetBrains IDEs run the run configurations and tool paths it holds", false},
	{".envrc", "direnv runs it when the user's shell enters the directory", false},
	{".mcp.json", "Claude Code on the host starts the MCP servers it lists", false},
	// Claude Code loads everything of a project's .claude: the hooks of
	// settings.json and settings.local.json, subagents (.claude/agents/*.md,
	// whose frontmatter carries hooks and MCP servers), skills
	// (.claude/skills/*/SKILL.md), commands, the hook scripts they run. It
	// is read-only whole, and an empty read-only placeholder when missing
	// (an empty .claude is nothing to Claude Code, and git does not list
	// an empty directory), so that the session cannot make one (issue 40).
	{".claude", "Claude Code on the host loads what it holds: the hooks of its settings, its subagents (.claude/agents, whose frontmatter carries hooks and MCP servers), skills, commands and hook scripts", true},
	{".lsp.json", "Claude Code on the host starts the language servers it configures", false},
	// Tools a shell prompt or an editor runs on entering the directory, or
	// any command of theirs, which pick a program to run from these files
	// (each shown on the host: issue 31's second round).
	{"rust-toolchain.toml", "rustup on the host runs the toolchain its path names at any cargo or rustc command (a shell prompt's rustc --version)", false},
	{"rust-toolchain", "rustup on the host runs the toolchain its path names at any cargo or rustc command", false},
	{".cargo/config.toml", "cargo on the host runs its rustc-wrapper and runners, also at the cargo metadata an editor runs on opening the project", false},
	{".cargo/config", "cargo on the host runs its rustc-wrapper and runners, also at the cargo metadata an editor runs on opening the project", false},
	{".npmrc", "npm on the host takes it over the user's own config: ignore-scripts=false, script-shell, node-options", false},
	{".yarnrc.yml", "yarn on the host runs the program its yarnPath names at any yarn command", false},
	{".yarnrc", "yarn on the host runs the program its yarn-path names at any yarn command", false},
	// Version managers a shell prompt runs through (its python --version,
	// node --version): a version may be a directory (asdf's and mise's
	// path:DIR), whose bin/ then runs; mise's configs also name hooks run
	// on cd, environment and tasks, trusted by their path, not content.
	{".tool-versions", "asdf and mise on the host run the tool versions it names, and a path: version runs that directory's programs (a shell prompt's python --version)", false},
	{"mise.toml", miseReason, false},
	{".mise.toml", miseReason, false},
	{"mise.local.toml", miseReason, false},
	{".mise.local.toml", miseReason, false},
	{".mise/config.toml", miseReason, false},
	{".config/mise.toml", miseReason, false},
	{".config/mise/config.toml", miseReason, false},
	// The rest of the names mise's config discovery reads in a project
	// directory (jdx/mise src/config/mod.rs, LOCAL_CONFIG_FILENAMES): the
	// older rtx names, the local ones, and conf.d, all of whose *.toml it
	// loads (read-only whole).
	{"mise/config.toml", miseReason, false},
	{".rtx.toml", miseReason, false},
	{".rtx.local.toml", miseReason, false},
	{".mise/config.local.toml", miseReason, false},
	{".config/mise.local.toml", miseReason, false},
	{".config/mise/config.local.toml", miseReason, false},
	{".config/mise/conf.d", miseReason + " (it loads every *.toml in conf.d)", false},
	// Editors that run a file of the project on opening it: VS Code's
	// devcontainer runs initializeCommand on the host at "Reopen in
	// Container"; vim with 'exrc' runs the directory's .vimrc or .exrc
	// without asking (neovim asks, by content).
	{".devcontainer", "VS Code and the devcontainer CLI run its initializeCommand on the host when you reopen the folder in its container", false},
	{".devcontainer.json", "VS Code and the devcontainer CLI run its initializeCommand on the host when you reopen the folder in its container", false},
	{".vimrc", "vim with 'exrc' set runs it when started in the directory, without asking", false},
	{".exrc", "vim with 'exrc' set runs it when started in the directory, without asking", false},
	{".gvimrc", "gvim with 'exrc' set runs it when started in the directory, without asking", false},
	{".nvim.lua", "neovim with 'exrc' set runs it when started in the directory (once you trusted it, until it changes)", false},
	{".nvimrc", "neovim with 'exrc' set runs it when started in the directory (once you trusted it, until it changes)", false},
	// Package managers' project configs that, like .npmrc, take over the
	// user's own: the index a `uv pip install requests` or a `bundle
	// install` fetches from (and runs the build of).
	{"uv.toml", "uv on the host takes its index and settings over your own: the packages it fetches, and whose builds it runs", false},
	{"poetry.toml", "poetry on the host takes its repositories and settings over your own", false},
	{".bundle/config", "bundler on the host takes its mirrors, paths and settings over your own", false},
	// The other agents, when you run them on the host in the workspace:
	// what a project's configuration makes them start or load. Their
	// directories are read-only whole when they exist (a missing one is
	// not protected: a placeholder for each agent in every workspace would
	// be litter for the agents you do not use).
	{"opencode.json", "opencode on the host loads the plugins and starts the MCP servers it names", false},
	{"opencode.jsonc", "opencode on the host loads the plugins and starts the MCP servers it names", false},
	{".opencode", "opencode on the host loads the plugins, agents and commands in it (.opencode/plugins) and its config", false},
	{".pi", "pi on the host loads the packages, extensions and skills its settings and directories name", false},
	{".codex", "Codex on the host starts the MCP servers and runs the commands its config.toml configures, and loads its skills", false},
	{".agents", "Codex and other agents on the host load the skills in it (.agents/skills), whose scripts they run", false},
	{".gemini", "Gemini CLI on the host starts the MCP servers its settings configure and runs its commands' shell lines", false},
	{".cursor", "Cursor on the host starts the MCP servers (mcp.json) and runs the hooks (hooks.json) it configures", false},
	{".github/agents", "GitHub Copilot CLI on the host loads its custom agents, whose frontmatter starts MCP servers", false},
	{".github/skills", "GitHub Copilot CLI on the host loads the skills in it, whose scripts it runs", false},
	{".github/hooks", "GitHub Copilot CLI on the host runs the hooks it configures", false},
	{".kiro", "Kiro on the host runs its hooks and starts the MCP servers its settings configure", false},
	{".continue", "Continue on the host starts the MCP servers its config names", false},
	{".roo", "Roo Code on the host starts the MCP servers its mcp.json names", false},
	{".amazonq", "Amazon Q on the host starts the MCP servers its mcp.json names", false},
	{".zed", "Zed on the host runs the language servers and tasks its settings name", false},
}

// Protect prepares the binds that make ws's host-executed entries
// read-only, making the placeholders they need, and returns them with the
// identities of what they bind (checked by the init like every bind). ws is
// the checked workspace's real path, home the user's home, whose links
// into ws are followed (hostexec_homelinks.go). A symlink in place of an
// entry is refused: the session could redirect it.
func Protect(ws, home string) ([]sandbox.Bind, []sandbox.BindID, error) {
	var binds []sandbox.Bind
	var ids []sandbox.BindID
	pinned := map[string]bool{}
	roDir := map[string]bool{} // entries bound read-only whole: nothing below needs a bind
	if real, err := filepath.EvalSymlinks(home); err == nil {
		home = real // (links into ws are compared by their real paths)
	}
	linked, err := homeLinkEntries(home, ws)
	if err != nil {
		return nil, nil, err
	}
	entries := append(append(append([]Entry{}, Entries...), hookExec(ws)...), linked...)
	for _, e := range entries {
		if under(e.Rel, roDir) {
			continue
		}
		path := filepath.Join(ws, e.Rel)
		st, err := sandbox.StatNoFollow(path)
		missing := errors.Is(err, unix.ENOENT)
		switch {
		case err != nil && !missing:
			var lst unix.Stat_t
			if errors.Is(err, unix.ELOOP) || (unix.Lstat(path, &lst) == nil && lst.Mode&unix.S_IFMT == unix.S_IFLNK) {
				return nil, nil, fmt.Errorf("%s (or a directory on its way) is a symlink, which a session could redirect to what the host runs: replace it with what it points to, or start with --allow-write-host-exec", path)
			}
			if errors.Is(err, unix.ENOTDIR) {
				continue // its directory is a file: nothing to protect below
			}
			return nil, nil, fmt.Errorf("cannot check %s: %w", path, err)
		case missing && !e.Placeholder:
			continue
		case missing:
			parent := filepath.Dir(path)
			if _, perr := sandbox.StatNoFollow(parent); perr != nil {
				continue // its directory is missing too, and is protected itself
			}
			testhook.Call(hookBeforePlaceholder, parent)
			// Made in the directory checked, not by its path again: a
			// session sharing the workspace may have swapped a directory on
			// the way for a symlink since, to have mosaic make the directory
			// elsewhere.
			if err := sandbox.MkdirNoFollow(path, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				return nil, nil, fmt.Errorf("cannot make the placeholder %s: %w", path, err)
			}
			if st, err = sandbox.StatNoFollow(path); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
				return nil, nil, fmt.Errorf("the placeholder %s changed while mosaic made it", path)
			}
		}
		// The directories holding it inside the workspace are pinned first.
		for dir := filepath.Dir(e.Rel); dir != "."; dir = filepath.Dir(dir) {
			if pinned[dir] {
				continue
			}
			pinned[dir] = true
			d := filepath.Join(ws, dir)
			dst, err := sandbox.StatNoFollow(d)
			if err != nil {
				return nil, nil, fmt.Errorf("cannot check %s: %w", d, err)
			}
			binds = append(binds, sandbox.Bind{Kind: sandbox.KindRW, Src: d, Dst: d, Reason: "pinned (a mount point cannot be renamed): the session cannot put another " + dir + " in its place"})
			ids = append(ids, sandbox.BindID{Path: d, ID: sandbox.StatID(dst)})
		}
		reason := "read-only: " + e.Reason
		if missing {
			reason = "an empty read-only placeholder, so that the session cannot create it: " + e.Reason
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if e.Rel == ".git" && !missing {
				// A repository: pinned, its config and hooks read-only.
				pinned[".git"] = true
				binds = append(binds, sandbox.Bind{Kind: sandbox.KindRW, Src: path, Dst: path, Reason: "pinned (a mount point cannot be renamed): the session cannot put another .git in its place"})
				ids = append(ids, sandbox.BindID{Path: path, ID: sandbox.StatID(st)})
				continue
			}
			roDir[e.Rel] = true
		}
		binds = append(binds, sandbox.Bind{Kind: sandbox.KindRO, Src: path, Dst: path, Reason: reason})
		ids = append(ids, sandbox.BindID{Path: path, ID: sandbox.StatID(st)})
	}
	return binds, ids, nil
}

// under reports whether rel lies inside one of dirs.
func under(rel string, dirs map[string]bool) bool {
	for d := range dirs {
		if strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

// hookBeforePlaceholder is the test hook (testhook.Call) between the check
// of a placeholder's directory and the making of the placeholder.
const hookBeforePlaceholder = "before-placeholder"
