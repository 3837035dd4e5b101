package patchcheck

import (
	"path"
	"strings"
)

// HostRun says why the user's own tools may run a file of a checkout
// ("" when nothing is known to): what `mosaic diff` calls out at the top,
// since a change to it runs the agent's code on the host once applied.
func HostRun(p string) string {
	base := path.Base(p)
	lower := strings.ToLower(base)
	first, _, _ := strings.Cut(p, "/")
	switch {
	case lower == ".envrc" || lower == ".env":
		return "direnv and dotenv tools load it on cd"
	case first == ".vscode" || first == ".idea" || first == ".devcontainer", strings.Contains(p, "/.vscode/") || strings.Contains(p, "/.idea/"):
		return "the editor runs its tasks, launchers and tool paths"
	case lower == "rust-toolchain.toml" || lower == "rust-toolchain" || strings.HasSuffix(p, ".cargo/config.toml") || strings.HasSuffix(p, ".cargo/config"):
		return "rustup and cargo run the toolchain and wrappers it names, at any cargo or rustc"
	case lower == ".tool-versions" || lower == "mise.toml" || lower == ".mise.toml" || lower == "mise.local.toml" || lower == ".mise.local.toml" || strings.HasSuffix(p, ".mise/config.toml") || strings.HasSuffix(p, ".config/mise.toml") || strings.HasSuffix(p, ".config/mise/config.toml"):
		return "asdf and mise run the versions (path:DIR), hooks and environment it names, on cd"
	case lower == "opencode.json" || lower == "opencode.jsonc" || first == ".opencode" || p == ".pi/settings.json" || strings.HasPrefix(p, ".pi/extensions/") || p == ".codex/config.toml" || p == ".gemini/settings.json":
		return "agents on the host load these plugins and start these servers"
	case strings.HasSuffix(lower, ".pth") || lower == "sitecustomize.py" || lower == "usercustomize.py":
		return "python runs it at every start of the environment that holds it (an editor's, a prompt's)"
	case lower == "flake.lock" || lower == ".lfsconfig":
		return "nix (direnv's use flake) or git-lfs reads what to fetch and run from it"
	case p == ".claude/settings.json" || p == ".claude/settings.local.json" || strings.HasPrefix(p, ".claude/commands/") || strings.HasPrefix(p, ".claude/hooks/"):
		return "Claude Code on the host runs its hooks and commands"
	case p == ".mcp.json" || p == ".cursor/mcp.json":
		return "agents on the host start these MCP servers"
	case lower == ".gitattributes":
		return "names filters and diff drivers your git runs"
	case lower == "makefile" || lower == "gnumakefile" || strings.HasSuffix(lower, ".mk") || lower == "justfile" || lower == "taskfile.yml":
		return "make (or just, task) runs it"
	case first == ".github" && strings.Contains(p, "/workflows/"), lower == ".gitlab-ci.yml", first == ".circleci", lower == "jenkinsfile", lower == ".travis.yml", first == ".buildkite", lower == "azure-pipelines.yml":
		return "CI runs it"
	case lower == "package.json":
		return "npm runs its scripts (install, test, prepare)"
	case lower == ".npmrc" || lower == ".yarnrc" || lower == ".yarnrc.yml" || lower == ".pnpmfile.cjs":
		return "the package manager reads it (scripts, registries)"
	case first == ".husky" || lower == ".pre-commit-config.yaml" || lower == "lefthook.yml" || lower == ".lefthook.yml":
		return "a hook manager runs it at git commit"
	case lower == "setup.py" || lower == "pyproject.toml" || lower == "conftest.py" || lower == "build.rs" || lower == "cargo.toml" || lower == "build.gradle" || lower == "pom.xml":
		return "the build or test tool runs it"
	case lower == "shell.nix" || lower == "flake.nix" || lower == "default.nix":
		return "nix-shell and direnv evaluate it"
	}
	return ""
}
