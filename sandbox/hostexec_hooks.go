package sandbox

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"

	"mosaic/units/regfile"
)

// Hooks git runs from the worktree. .git/hooks is read-only, but git runs
// the hooks of the directory core.hooksPath names instead, which is often
// inside the worktree (husky sets .husky/_, many projects .githooks), and
// the hook managers installed in .git/hooks run what a worktree file says
// (pre-commit's .pre-commit-config.yaml, lefthook's lefthook.yml): a
// session that edits them has the host run its commands at the next `git
// commit`. These are protected like the other host-executed entries. A
// missing one is not watched: without a hook that names it (in .git/hooks
// or .git/config, which the session cannot write) creating it runs nothing.

// hookEntries are the hook managers' files and directories.
var hookEntries = []HostExec{
	{".husky", "git on the host runs the hooks in it at commit (husky)", false},
	{".pre-commit-config.yaml", "git on the host runs the commands it names at commit (pre-commit)", false},
	{"lefthook.yml", "git on the host runs the commands it names at commit (lefthook)", false},
	{".lefthook.yml", "git on the host runs the commands it names at commit (lefthook)", false},
}

// hooksPathReason is the reason of the core.hooksPath directory's entry.
const hooksPathReason = "git on the host runs the hooks in it (core.hooksPath)"

// hookExec lists ws's hook entries: hookEntries, and the directory that
// core.hooksPath names (in the repository's config or the user's global
// one) when it lies inside ws. watch is that directory when it is missing
// and would be run once created (the config naming it is not the
// session's to change).
func hookExec(ws string) (entries []HostExec, watch []HostExec) {
	entries = append(entries, hookEntries...)
	rel := hooksPathIn(ws)
	if rel == "" {
		return entries, nil
	}
	for _, e := range append(append([]HostExec{}, HostExecEntries...), hookEntries...) {
		if rel == e.Rel || strings.HasPrefix(rel, e.Rel+"/") {
			return entries, nil // protected as it is
		}
	}
	e := HostExec{Rel: rel, Reason: hooksPathReason}
	if _, err := os.Lstat(filepath.Join(ws, rel)); os.IsNotExist(err) {
		return entries, []HostExec{e}
	}
	return append(entries, e), nil
}

// hooksPathIn is core.hooksPath, relative to ws, when it names a
// directory inside ws ("" otherwise). The repository's config wins over
// the user's; a relative path is the worktree's top, ~/ the home, as git
// reads them. Includes are not followed.
func hooksPathIn(ws string) string {
	home, _ := os.UserHomeDir()
	cfg := os.Getenv("XDG_CONFIG_HOME")
	if cfg == "" && home != "" {
		cfg = filepath.Join(home, ".config")
	}
	var v string
	for _, f := range []string{filepath.Join(ws, ".git", "config"), filepath.Join(home, ".gitconfig"), filepath.Join(cfg, "git", "config")} {
		if v = gitConfigValue(f, "core", "hookspath"); v != "" {
			break
		}
	}
	switch {
	case v == "":
		return ""
	case strings.HasPrefix(v, "~/") && home != "":
		v = filepath.Join(home, v[2:])
	case !filepath.IsAbs(v):
		v = filepath.Join(ws, v)
	}
	v = filepath.Clean(v)
	if v == ws || !Within(v, ws) {
		return ""
	}
	return strings.TrimPrefix(v, ws+"/")
}

// gitConfigValue reads the last value of section.key (lower case, no
// subsection) from a git config file: enough of git's syntax for a path
// (comments, quotes, "key = value" or "key=value"); "" when absent or
// unreadable. A FIFO or a huge file is not read.
func gitConfigValue(path, section, key string) string {
	b, err := regfile.Read(path, true, 1<<20)
	if err != nil {
		return ""
	}
	var val, cur string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			end := strings.Index(line, "]")
			if end < 0 {
				continue
			}
			cur = strings.ToLower(strings.TrimSpace(line[1:end]))
			line = strings.TrimSpace(line[end+1:]) // [core] hooksPath = x is valid
		}
		if cur != section || line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		if strings.ToLower(strings.TrimSpace(k)) != key {
			continue
		}
		val = gitValue(strings.TrimSpace(v))
	}
	return val
}

// gitValue unquotes a config value and drops a trailing comment.
func gitValue(v string) string {
	var out strings.Builder
	quoted := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			quoted = !quoted
		case c == '\\' && i+1 < len(v):
			i++
			switch v[i] {
			case 'n':
				out.WriteByte('\n')
			case 't':
				out.WriteByte('\t')
			default:
				out.WriteByte(v[i])
			}
		case (c == '#' || c == ';') && !quoted:
			return strings.TrimSpace(out.String())
		default:
			out.WriteByte(c)
		}
	}
	return strings.TrimSpace(out.String())
}
