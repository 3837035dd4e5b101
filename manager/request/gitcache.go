package request

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"mosaic/internal/regfile"
)

// The user's git settings are read at every start, and a run of git is a
// process start: some 3 ms of a start's wall time, and CPU that 100 starts
// at once share two cores for. So what git printed is kept, in a cache
// file in mosaic's runtime directory (GitCacheFile), beside what decided
// it: the settings kept (gitSettings: another mosaic of this user, older or
// newer, shares the file and may keep others), the git binary, the variables that pick its files (HOME,
// XDG_CONFIG_HOME; the GIT_ ones never reach it, gitEnv), and each file it
// read or would read, included ones too, as device, inode, size, mtime,
// ctime and mode, or its absence. A start that finds every one of them
// unchanged uses what is kept and runs no git; anything else (a file
// changed, made or removed, another git, another HOME, a cache it cannot
// read) runs git as before, which refills the cache.
//
// Why it holds: the cache lies in the runtime directory, which no session
// sees (the deny-list); the files it is keyed by are the user's own
// (their home's and the system's), and a session that could write one (an
// include target in its workspace) cannot change it without changing its
// ctime, which no process can set back. A file changed within
// gitCacheSettle of git's run is not trusted to show its next change in
// its times (a filesystem's clock is coarse), so such a run is not kept.
// What is kept is only what gitConfigFor takes (the gitSettings), which
// it filters again when it is used.

// gitCacheHeader is the first line of a cache file of this format.
const gitCacheHeader = "mosaic git settings cache 1\n"

// gitCacheMax bounds the cache file mosaic reads.
const gitCacheMax = 1 << 20

// gitCacheSettle is how long before git's run a file it read must have
// last changed for the run to be kept (a test shortens it).
var gitCacheSettle = 3 * time.Second

// GitCacheFile is where the user's git settings are kept between starts.
func (p Paths) GitCacheFile() string {
	return filepath.Join(p.RuntimeDir, "mosaic", "git-settings")
}

// errDoubt is a reason not to trust a cache, or not to keep one.
var errDoubt = errors.New("not cacheable")

// runGitConfig runs git to list the user's whole config from /, includes
// followed, with each entry's scope and file (git config -z --show-scope
// --show-origin --list). A test counts its calls.
var runGitConfig = func(git string, env []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), gitConfigTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, git, "config", "--includes", "--show-scope", "--show-origin", "--null", "--list")
	cmd.Dir = "/"
	cmd.Env = env
	return cmd.Output()
}

// gitRead is one reading of the user's git settings: git's output for
// gitConfigFor, and what decided it (the key's lines), empty when it must
// not be kept.
type gitRead struct {
	out []byte
	key []string
}

// readGitConfig reads the user's git settings with git (runGitConfig):
// the entries of gitSettings, as "scope NUL key LF value NUL", and the
// key to keep them by if nothing about the run is in doubt.
func readGitConfig(git string, env []string) gitRead {
	start := time.Now()
	list, err := runGitConfig(git, env)
	out, files, perr := parseGitList(list, env)
	if err != nil || perr != nil {
		return gitRead{out: out}
	}
	key, err := gitKey(git, env, files, start.Add(-gitCacheSettle))
	if err != nil {
		return gitRead{out: out}
	}
	return gitRead{out: out, key: key}
}

// parseGitList takes from git's listing the gitSettings entries (the
// output readUserGitConfig returns) and the files whose change could
// change it: the system's and the user's own config files, read or not,
// every file an entry came from, and every include's target, followed or
// not (its condition may change). An entry of another scope or origin
// than a file of the system or global scope, an include path mosaic
// cannot resolve as git does, or a relative HOME, XDG_CONFIG_HOME or file
// (git, in /, and mosaic, in its own directory, would each find another
// file by it) is doubt.
func parseGitList(list []byte, env []string) (out []byte, files []string, _ error) {
	allowed := map[string]bool{}
	for _, k := range gitSettings {
		allowed[k] = true
	}
	home, xdg := envValue(env, "HOME"), envValue(env, "XDG_CONFIG_HOME")
	if xdg == "" {
		xdg = filepath.Join(home, ".config")
	}
	files = []string{"/etc/gitconfig", filepath.Join(xdg, "git", "config"), filepath.Join(home, ".gitconfig"), "/.git"}
	var doubt error
	// git runs in /, and mosaic stats the files where it runs (in the
	// workspace, often): a relative path would name another file in each.
	if !filepath.IsAbs(home) || !filepath.IsAbs(xdg) {
		doubt = errDoubt
	}
	fields := bytes.Split(list, []byte{0})
	for i := 0; i+2 < len(fields); i += 3 {
		scope, origin := string(fields[i]), string(fields[i+1])
		key, value, _ := strings.Cut(string(fields[i+2]), "\n")
		key = strings.ToLower(key)
		if allowed[key] {
			out = append(append(append(append(append(out, scope...), 0), key...), '\n'), value...)
			out = append(out, 0)
		}
		file, ok := strings.CutPrefix(origin, "file:")
		if (scope != "system" && scope != "global") || !ok || file == "" {
			doubt = errDoubt
			continue
		}
		if !filepath.IsAbs(file) {
			doubt = errDoubt
		}
		files = append(files, file)
		if key == "include.path" || (strings.HasPrefix(key, "includeif.") && strings.HasSuffix(key, ".path")) {
			target, err := includeTarget(value, file, home)
			if err != nil {
				doubt = err
				continue
			}
			files = append(files, target)
		}
	}
	return out, files, doubt
}

// includeTarget is the file an include's path names, as git resolves it:
// ~/ is the home, a relative path is the including file's directory's.
func includeTarget(path, from, home string) (string, error) {
	switch {
	case path == "" || strings.Contains(path, "%("):
		return "", errDoubt
	case strings.HasPrefix(path, "~/"):
		return filepath.Join(home, path[2:]), nil
	case strings.HasPrefix(path, "~"): // another user's home
		return "", errDoubt
	case filepath.IsAbs(path):
		return path, nil
	}
	return filepath.Join(filepath.Dir(from), path), nil
}

// envValue is the value of NAME in env, "" when unset.
func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// gitKey is the key of a git run: one line for the settings kept (the
// cache is every mosaic's of this user, an older or newer one keeps
// others), one for the git binary, one per variable, one per file (its
// identity, or its absence). A file that changed after settled, or that
// is not a regular file, is doubt.
func gitKey(git string, env []string, files []string, settled time.Time) ([]string, error) {
	gst, err := fileState(git, settled)
	if err != nil {
		return nil, err
	}
	key := []string{"keep " + strconv.Quote(strings.Join(gitSettings, " ")), "git " + strconv.Quote(git) + " " + gst}
	for _, name := range []string{"HOME", "XDG_CONFIG_HOME"} {
		key = append(key, "env "+strconv.Quote(name)+" "+strconv.Quote(envValue(env, name)))
	}
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f] {
			continue
		}
		seen[f] = true
		st, err := fileState(f, settled)
		if err != nil {
			return nil, err
		}
		key = append(key, "file "+strconv.Quote(f)+" "+st)
	}
	return key, nil
}

// fileState is a file's identity and times, as git would find it (its
// symlinks followed), or "absent". With a non-zero settled, a file that
// changed after it is doubt.
func fileState(path string, settled time.Time) (string, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return "absent", nil
	}
	if err != nil || !fi.Mode().IsRegular() {
		return "", errDoubt
	}
	if key := regfile.StateKey(fi, settled); key != "" {
		return key, nil
	}
	return "", errDoubt
}

// cachedGitConfig is the kept output if the cache file holds one whose
// key still holds for git and env.
func cachedGitConfig(file, git string, env []string) ([]byte, bool) {
	b, err := regfile.Read(file, true, gitCacheMax)
	if err != nil {
		return nil, false
	}
	rest, ok := bytes.CutPrefix(b, []byte(gitCacheHeader))
	if !ok {
		return nil, false
	}
	lines := strings.Split(string(rest), "\n")
	if len(lines) < 2 || lines[len(lines)-1] != "" {
		return nil, false
	}
	outLine, ok := strings.CutPrefix(lines[len(lines)-2], "out ")
	if !ok {
		return nil, false
	}
	var files []string
	for _, l := range lines[:len(lines)-2] {
		if f, ok := strings.CutPrefix(l, "file "); ok {
			q, err := strconv.QuotedPrefix(f)
			if err != nil {
				return nil, false
			}
			name, _ := strconv.Unquote(q)
			files = append(files, name)
		}
	}
	key, err := gitKey(git, env, files, time.Time{})
	if err != nil || strings.Join(key, "\n") != strings.Join(lines[:len(lines)-2], "\n") {
		return nil, false
	}
	out, err := base64.StdEncoding.DecodeString(outLine)
	if err != nil {
		return nil, false
	}
	return out, true
}

// keepGitConfig writes r to the cache file, atomically and 0600, when it
// may be kept; a cache that cannot be written is left as it is (the next
// start runs git).
func keepGitConfig(file string, r gitRead) {
	if file == "" || len(r.key) == 0 {
		return
	}
	content := gitCacheHeader + strings.Join(r.key, "\n") + "\nout " + base64.StdEncoding.EncodeToString(r.out) + "\n"
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return
	}
	_ = regfile.WriteAtomic(file, []byte(content))
}
