package directfloor

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"

	"mosaic/internal/regfile"
)

// Git's configuration as the host's git reads it for a workspace: the
// system, global and repository files in git's order, each include
// (include.path, includeIf.*.path) read at its place. An included file
// inside the workspace is configuration the session could write: a
// `[core] fsmonitor` appended to a shared ../.gitconfig-shared that the
// repository's read-only config includes ran on the host at the next `git
// status`. So each include target inside the workspace is protected like
// .git/config (hostexec_hooks.go), whatever the condition of an includeIf
// (the session can switch branches, and so satisfy onbranch:).

// maxIncludeDepth is git's own bound on nested includes (config.c).
const maxIncludeDepth = 10

// includeReason is the reason of an included file's entry.
const includeReason = "git on the host reads it as configuration (an include.path or includeIf path names it): core.fsmonitor, hooks, aliases"

// gitConfigEntry is one "key = value" of a git config file: section and
// key lower case, the subsection as written.
type gitConfigEntry struct{ section, sub, key, value string }

// parseGitConfig reads enough of git's config syntax for paths: sections
// with or without a subsection ([a "b"], [a.b]), comments, quotes,
// "key = value" or a bare key (true).
func parseGitConfig(b []byte) []gitConfigEntry {
	var out []gitConfigEntry
	var section, sub string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			end := strings.LastIndex(line, "]")
			if q := strings.Index(line, "\""); q >= 0 {
				// The subsection may hold "]": the header ends after its
				// closing quote.
				if c := strings.LastIndex(line, "\""); c > q {
					end = c + strings.Index(line[c:], "]")
				}
			}
			if end <= 0 {
				continue
			}
			section, sub = splitSection(line[1:end])
			line = strings.TrimSpace(line[end+1:]) // [core] hooksPath = x is valid
		}
		if line == "" || line[0] == '#' || line[0] == ';' || section == "" {
			continue
		}
		k, v, hasValue := strings.Cut(line, "=")
		e := gitConfigEntry{section: section, sub: sub, key: strings.ToLower(strings.TrimSpace(k)), value: "true"}
		if hasValue {
			e.value = gitValue(strings.TrimSpace(v))
		}
		out = append(out, e)
	}
	return out
}

// splitSection splits a section header's text: `includeIf "gitdir:x/"`
// or `a.b` (the old form, whose subsection is lower case).
func splitSection(h string) (section, sub string) {
	h = strings.TrimSpace(h)
	if s, q, ok := strings.Cut(h, "\""); ok {
		q = strings.TrimSuffix(q, "\"")
		q = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(q)
		return strings.ToLower(strings.TrimSpace(s)), q
	}
	s, sub, _ := strings.Cut(h, ".")
	return strings.ToLower(s), strings.ToLower(sub)
}

// gitConfigValue reads the last value of section.key (lower case, no
// subsection) from a git config file; "" when absent or unreadable. A FIFO
// or a huge file is not read.
func gitConfigValue(path, section, key string) string {
	b, err := regfile.Read(path, true, 1<<20)
	if err != nil {
		return ""
	}
	var val string
	for _, e := range parseGitConfig(b) {
		if e.section == section && e.sub == "" && e.key == key {
			val = e.value
		}
	}
	return val
}

// includePath is an include's target as git resolves it: ~/ is the home,
// a relative path the directory of the file that includes it; "" when it
// names no file git reads (~user/).
func includePath(v, from, home string) string {
	switch {
	case v == "":
		return ""
	case strings.HasPrefix(v, "~/"):
		if home == "" {
			return ""
		}
		v = filepath.Join(home, v[2:])
	case strings.HasPrefix(v, "~"):
		return ""
	case !filepath.IsAbs(v):
		v = filepath.Join(filepath.Dir(from), v)
	}
	return filepath.Clean(v)
}

// gitConfigRead is what the host's git reads for a workspace.
type gitConfigRead struct {
	hooksPath string   // core.hooksPath, the last one read (as written)
	includes  []string // every file an include names, absolute
	top       string   // the repository's worktree top, which a relative hooksPath is taken from
}

// readGitConfig reads the configuration the host's git reads in ws:
// /etc/gitconfig, the user's ($XDG_CONFIG_HOME/git/config, ~/.gitconfig),
// the repository's (repoDirs: also through a .git file, or one above ws)
// and its config.worktree, includes expanded in place.
func readGitConfig(ws string) gitConfigRead {
	home, _ := os.UserHomeDir()
	cfg := os.Getenv("XDG_CONFIG_HOME")
	if cfg == "" && home != "" {
		cfg = filepath.Join(home, ".config")
	}
	files := []string{"/etc/gitconfig"}
	if cfg != "" {
		files = append(files, filepath.Join(cfg, "git", "config"))
	}
	if home != "" {
		files = append(files, filepath.Join(home, ".gitconfig"))
	}
	gitdir, common, top := repoDirs(ws)
	files = append(files, filepath.Join(common, "config"), filepath.Join(gitdir, "config.worktree"))
	r := gitConfigRead{top: top}
	var read func(path string, depth int)
	read = func(path string, depth int) {
		b, err := regfile.Read(path, false, 1<<20)
		if err != nil {
			return
		}
		for _, e := range parseGitConfig(b) {
			switch {
			case e.section == "core" && e.sub == "" && e.key == "hookspath":
				r.hooksPath = e.value
			case e.key == "path" && (e.section == "include" && e.sub == "" || e.section == "includeif"):
				p := includePath(e.value, path, home)
				if p == "" || len(r.includes) >= 100 {
					continue
				}
				r.includes = append(r.includes, p)
				if depth < maxIncludeDepth {
					read(p, depth+1)
				}
			}
		}
	}
	for _, f := range files {
		read(f, 1)
	}
	return r
}

// repoDirs are the git directory, common directory and worktree top of
// the repository git finds for ws: ws/.git, or where a .git file and the
// commondir in it lead; when ws/.git is missing or empty (the placeholder
// of a workspace inside a bigger repository), the nearest one above, as
// git's discovery goes.
func repoDirs(ws string) (gitdir, common, top string) {
	for top = ws; ; top = filepath.Dir(top) {
		gitdir = filepath.Join(top, ".git")
		if st, err := os.Stat(filepath.Join(gitdir, "HEAD")); err == nil && st.Mode().IsRegular() {
			break
		}
		if b, err := regfile.Read(gitdir, false, 4096); err == nil {
			if t, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:"); ok {
				t = strings.TrimSpace(t)
				if !filepath.IsAbs(t) {
					t = filepath.Join(top, t)
				}
				gitdir = filepath.Clean(t)
				break
			}
		}
		if top == "/" || top == "." {
			return filepath.Join(ws, ".git"), filepath.Join(ws, ".git"), ws
		}
	}
	common = gitdir
	if b, err := regfile.Read(filepath.Join(gitdir, "commondir"), false, 4096); err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitdir, c)
		}
		common = filepath.Clean(c)
	}
	return gitdir, common, top
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
