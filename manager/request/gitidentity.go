package request

import (
	"bytes"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
)

// Git inside a session knows who the user is: a few settings of the
// user's git config (their global and system files, with what those
// include) reach the session, written as the session's own ~/.gitconfig at
// each start (units.Spec.GitConfig). Nothing else of it does: no
// credential helper, include, url rewrite, sshCommand, alias, hook path or
// filter, which run programs or reach hosts with the user's keys; the
// user's files themselves stay on the deny-list.

// gitSettings are the settings that reach the session: who the user is,
// and what shapes how git behaves without running anything.
var gitSettings = []string{
	"user.name", "user.email",
	"init.defaultbranch",
	"core.autocrlf", "core.eol", "core.quotepath", "core.whitespace", "core.ignorecase", "core.precomposeunicode",
	"pull.rebase", "pull.ff", "push.default", "push.autosetupremote",
	"merge.conflictstyle", "merge.ff", "rebase.autosquash", "rebase.autostash", "rerere.enabled",
	"diff.algorithm", "diff.colormoved", "diff.renames",
	"color.ui", "column.ui", "branch.sort", "tag.sort", "log.date", "commit.verbose", "fetch.prune",
	"advice.detachedhead",
}

// gitConfigTimeout bounds the run of git that reads the user's settings.
const gitConfigTimeout = 3 * time.Second

// readUserGitConfig reads gitSettings from the user's global and system
// config, includes followed, as git's -z --show-scope output: kept in
// cache (GitCacheFile) if that still holds (gitcache.go), else from the
// user's git, run in / so that no repository's config is read (nor a
// repository's includeIf matched): mosaic never runs git in a tree a
// session could have written. What git said is returned with its key,
// for keepGitConfig; without git, nothing.
func readUserGitConfig(cache string) gitRead {
	git, err := exec.LookPath("git")
	if err != nil {
		return gitRead{}
	}
	env := gitEnv(os.Environ())
	if out, ok := cachedGitConfig(cache, git, env); ok {
		return gitRead{out: out}
	}
	return readGitConfig(git, env)
}

// startUserGitConfig starts readUserGitConfig at once, unless none is
// wanted, and returns what waits for its output: a run of git (a process
// start, some milliseconds) then overlaps the rest of the request's check
// instead of adding to it. A check that fails leaves it to end on its own,
// within gitConfigTimeout; the cache is written only by the wait, so a
// request that fails writes nothing.
func startUserGitConfig(none bool, cache string) func() []byte {
	if none {
		return func() []byte { return nil }
	}
	read := make(chan gitRead, 1)
	go func() { read <- readUserGitConfig(cache) }()
	return sync.OnceValue(func() []byte {
		r := <-read
		keepGitConfig(cache, r)
		return r.out
	})
}

// gitEnv is the caller's environment without what would make git read
// another config than the user's own files (GIT_CONFIG_*, GIT_DIR).
func gitEnv(environ []string) []string {
	var env []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return env
}

// gitConfigFor renders the session's ~/.gitconfig from out (git config
// -z --show-scope --get-regexp): the settings of gitSettings from the
// system and global scopes only, the later winning, as git reads them.
// "" when there is none.
func gitConfigFor(out []byte) string {
	allowed := map[string]bool{}
	for _, k := range gitSettings {
		allowed[k] = true
	}
	values := map[string]string{}
	fields := bytes.Split(out, []byte{0})
	for i := 0; i+1 < len(fields); i += 2 {
		scope := string(fields[i])
		key, value, _ := strings.Cut(string(fields[i+1]), "\n")
		if (scope != "system" && scope != "global") || !allowed[strings.ToLower(key)] || !plainValue(value) {
			continue
		}
		values[strings.ToLower(key)] = value
	}
	if len(values) == 0 {
		return ""
	}
	sections := map[string][]string{}
	for k, v := range values {
		sec, name, _ := strings.Cut(k, ".")
		sections[sec] = append(sections[sec], "\t"+name+" = "+quoteGitValue(v)+"\n")
	}
	names := make([]string, 0, len(sections))
	for s := range sections {
		names = append(names, s)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(GitConfigHeader)
	b.WriteString("# config that sessions get (user.name, user.email, init.defaultBranch, ...),\n")
	b.WriteString("# nothing else of it. Changes here last until the session's next start.\n")
	for _, s := range names {
		lines := sections[s]
		sort.Strings(lines)
		b.WriteString("[" + s + "]\n")
		b.WriteString(strings.Join(lines, ""))
	}
	return b.String()
}

// GitConfigHeader is the first line of every session's ~/.gitconfig that
// mosaic wrote, by which a later start with --no-git-identity knows it.
const GitConfigHeader = "# Written by mosaic at each start of this session: the settings of your git\n"

// plainValue reports whether a value can be written on one line of a
// config file: no control character.
func plainValue(v string) bool {
	return !strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// quoteGitValue quotes a value as git's config syntax reads it back
// unchanged: in double quotes, with " and \ escaped.
func quoteGitValue(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}
