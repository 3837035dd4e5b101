package directfloor

import (
	"os"
	"path/filepath"
	"strings"

	"mosaic/internal/regfile"
	"mosaic/sandbox"
)

// What the hooks run from the worktree. .git/hooks is read-only, and so
// are the hook managers' files, but a hook is often a symlink into the
// tree (`ln -s ../../scripts/pre-commit .git/hooks/pre-commit`) or a stub
// that runs a script of it (`exec ./tools/hooks/pre-commit`, pre-commit's
// `entry: ./scripts/lint.sh`, lefthook's `run: ./scripts/check`): a
// session that edits that script has the host run it at the next `git
// commit`. So each file of the workspace a hook or hook manager names
// this way is bound read-only like the hook itself. Only literal paths (or
// ones from git rev-parse --show-toplevel) are taken, and only files that
// exist at the start are protected: one the session makes (a hook's `[ -x
// tools/pre-commit.local ] && exec tools/pre-commit.local`) is not.

// hookTargetReason is the reason of a file a hook runs.
const hookTargetReason = "git on the host runs it at commit: a hook (or a hook manager's config) of the repository is a symlink to it or names it"

// maxHookTargets bounds the files taken from the hooks.
const maxHookTargets = 100

// maxHooks bounds the entries of one hooks directory looked at.
const maxHooks = 1000

// hookTargets lists the files inside ws (absolute) that the hooks of ws's
// repository (.git/hooks, the core.hooksPath directory hooksDir when set)
// and the hook managers' files lead to: a hook's symlink target, a path a
// hook script names, a pre-commit entry or lefthook run.
func hookTargets(ws, hooksDir string) []string {
	var out []string
	add := func(p string) {
		if p != ws && sandbox.Within(p, ws) && len(out) < maxHookTargets {
			out = append(out, p)
		}
	}
	scripts := []string{}
	for _, dir := range []string{filepath.Join(ws, ".git", "hooks"), hooksDir, filepath.Join(ws, ".husky")} {
		if dir == "" {
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) > maxHooks {
			continue
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if strings.HasSuffix(e.Name(), ".sample") {
				continue
			}
			if e.Type()&os.ModeSymlink != 0 {
				if t, err := filepath.EvalSymlinks(p); err == nil {
					add(t)
				}
				continue
			}
			scripts = append(scripts, p)
		}
	}
	for _, p := range scripts {
		for _, t := range namedPaths(ws, p, "") {
			add(t)
		}
	}
	for cfg, key := range hookConfigKeys {
		for _, t := range namedPaths(ws, filepath.Join(ws, cfg), key) {
			add(t)
		}
	}
	return out
}

// hookConfigKeys are the hook managers' configs and the key of the
// commands in them.
var hookConfigKeys = map[string]string{".pre-commit-config.yaml": "entry:", "lefthook.yml": "run:", ".lefthook.yml": "run:"}

// namedPaths lists the regular files inside ws that the file p names as
// words (relative to ws, the worktree's top where git runs its hooks, or
// from $(git rev-parse --show-toplevel)); with key, only on the lines of
// that YAML key.
func namedPaths(ws, p, key string) []string {
	b, err := regfile.Read(p, true, 64<<10)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "- "))
		if key != "" {
			v, ok := strings.CutPrefix(line, key)
			if !ok {
				continue
			}
			line = v
		}
		line = strings.ReplaceAll(line, "$(git rev-parse --show-toplevel)", ws)
		for _, w := range strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' || r == '"' || r == '\'' || r == ';' || r == '=' }) {
			if !strings.Contains(w, "/") || strings.ContainsAny(w, "$`*") || strings.HasPrefix(w, "-") {
				continue
			}
			if !filepath.IsAbs(w) {
				w = filepath.Join(ws, w)
			}
			if st, err := os.Lstat(w); err == nil && st.Mode().IsRegular() {
				out = append(out, filepath.Clean(w))
			}
		}
	}
	return out
}
