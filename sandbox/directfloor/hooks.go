package directfloor

import (
	"os"
	"path/filepath"
	"strings"

	"mosaic/sandbox"
)

// Hooks git runs from the worktree. .git/hooks is read-only, but git runs
// the hooks of the directory core.hooksPath names instead, which is often
// inside the worktree (husky sets .husky/_, many projects .githooks), and
// the hook managers installed in .git/hooks run what a worktree file says
// (pre-commit's .pre-commit-config.yaml, lefthook's lefthook.yml): a
// session that edits them has the host run its commands at the next `git
// commit`. These are protected like the other host-executed entries.

// hookEntries are the hook managers' files and directories.
var hookEntries = []Entry{
	{".husky", "git on the host runs the hooks in it at commit (husky)", false},
	{".pre-commit-config.yaml", "git on the host runs the commands it names at commit (pre-commit)", false},
	{"lefthook.yml", "git on the host runs the commands it names at commit (lefthook)", false},
	{".lefthook.yml", "git on the host runs the commands it names at commit (lefthook)", false},
}

// hooksPathReason is the reason of the core.hooksPath directory's entry.
const hooksPathReason = "git on the host runs the hooks in it (core.hooksPath)"

// hookExec lists ws's hook entries: hookEntries, the directory that
// core.hooksPath names, the files the includes of git's configuration name
// (gitconfig.go) and those its .envrc loads (hostexec_direnv.go), when they
// lie inside ws and exist (a missing one is not protected).
func hookExec(ws string) []Entry {
	entries := append([]Entry{}, hookEntries...)
	cfg := readGitConfig(ws)
	var named []Entry
	if rel := hooksPathIn(ws, cfg.top, cfg.hooksPath); rel != "" {
		named = append(named, Entry{Rel: rel, Reason: hooksPathReason})
	}
	for _, p := range cfg.includes {
		if p != ws && sandbox.Within(p, ws) {
			named = append(named, Entry{Rel: strings.TrimPrefix(p, ws+"/"), Reason: includeReason})
		}
	}
	for _, p := range envrcLoads(ws) {
		named = append(named, Entry{Rel: strings.TrimPrefix(p, ws+"/"), Reason: envrcReason})
	}
	for _, p := range hookTargets(ws, hooksPathAbs(cfg.top, cfg.hooksPath)) {
		named = append(named, Entry{Rel: strings.TrimPrefix(p, ws+"/"), Reason: hookTargetReason})
	}
	for _, e := range named {
		if protectedBy(ws, e.Rel, entries) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(ws, e.Rel)); err == nil {
			entries = append(entries, e)
		}
	}
	return entries
}

// protectedBy reports whether rel is one of Entries or entries
// that exists in ws, or lies inside one. .git is only pinned, not
// read-only: what lies in it is protected only when it is an entry of its
// own; nor is a missing entry (.husky) that no placeholder takes.
func protectedBy(ws, rel string, entries []Entry) bool {
	for _, p := range append(append([]Entry{}, Entries...), entries...) {
		if p.Rel == ".git" || rel != p.Rel && !strings.HasPrefix(rel, p.Rel+"/") {
			continue
		}
		if _, err := os.Lstat(filepath.Join(ws, p.Rel)); err == nil {
			return true
		}
	}
	return false
}

// hooksPathIn is the core.hooksPath value v, relative to ws, when it names
// a directory inside ws ("" otherwise): a relative path is taken from the
// worktree's top (ws, or the repository ws lies in), ~/ from the home, as
// git reads them.
func hooksPathIn(ws, top, v string) string {
	if v = hooksPathAbs(top, v); v == "" || v == ws || !sandbox.Within(v, ws) {
		return ""
	}
	return strings.TrimPrefix(v, ws+"/")
}

// hooksPathAbs is the core.hooksPath value v as an absolute path, "" when
// unset: a relative path is taken from the worktree's top, ~/ from the
// home, as git reads them.
func hooksPathAbs(top, v string) string {
	home, _ := os.UserHomeDir()
	switch {
	case v == "":
		return ""
	case strings.HasPrefix(v, "~/") && home != "":
		v = filepath.Join(home, v[2:])
	case !filepath.IsAbs(v):
		v = filepath.Join(top, v)
	}
	return filepath.Clean(v)
}
