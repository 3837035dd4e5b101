package request

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gitCacheCase is a home with a ~/.gitconfig that includes a file, a
// cache file for it, and a count of git's runs.
type gitCacheCase struct {
	t     *testing.T
	home  string
	cache string
	runs  int
}

func newGitCacheCase(t *testing.T) *gitCacheCase {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	c := &gitCacheCase{t: t, home: t.TempDir()}
	c.cache = filepath.Join(t.TempDir(), "mosaic", "git-settings")
	c.write(".gitconfig", "[user]\n\tname = Ann\n[include]\n\tpath = more\n\tpath = ~/later\n")
	c.write("more", "[user]\n\temail = ann@example.com\n")
	t.Setenv("HOME", c.home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(c.home, ".config"))
	settle, run := gitCacheSettle, runGitConfig
	gitCacheSettle = 0 // the files were just written
	runGitConfig = func(git string, env []string) ([]byte, error) {
		c.runs++
		return run(git, env)
	}
	t.Cleanup(func() { gitCacheSettle, runGitConfig = settle, run })
	return c
}

func (c *gitCacheCase) write(name, content string) {
	c.t.Helper()
	if err := os.WriteFile(filepath.Join(c.home, name), []byte(content), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// read is one start's reading of the settings: it checks what the session
// gets and whether git ran for it.
func (c *gitCacheCase) read(what string, want []string, gitRuns bool) {
	c.t.Helper()
	before := c.runs
	got := startUserGitConfig(false, c.cache)()
	for _, w := range want {
		if !strings.Contains(gitConfigFor(got), w) {
			c.t.Errorf("%s: %q missing from\n%s", what, w, gitConfigFor(got))
		}
	}
	if ran := c.runs > before; ran != gitRuns {
		c.t.Errorf("%s: git ran: %v, want %v", what, ran, gitRuns)
	}
}

// A start reads the user's git settings from the cache while every file
// git read (or would read) is as it was, and runs git again once one of
// them changed, appeared, or the home is another. (Each change below
// changes a size: the test keeps what git read however recently it
// changed, gitCacheSettle 0, so a change within the clock's tick shows
// only in the size.)
func TestGitCacheReadsAgainOnChange(t *testing.T) {
	c := newGitCacheCase(t)
	c.read("first start", []string{`name = "Ann"`, `email = "ann@example.com"`}, true)
	c.read("nothing changed", []string{`name = "Ann"`, `email = "ann@example.com"`}, false)
	if fi, err := os.Stat(c.cache); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the cache: %v %v, want a 0600 file", fi, err)
	}

	c.write(".gitconfig", "[user]\n\tname = Bobby\n[include]\n\tpath = more\n\tpath = ~/later\n")
	c.read("~/.gitconfig changed", []string{`name = "Bobby"`}, true)
	c.read("then unchanged", []string{`name = "Bobby"`}, false)

	c.write("more", "[user]\n\temail = bobby@example.com\n")
	c.read("an included file changed", []string{`email = "bobby@example.com"`}, true)

	c.write("later", "[init]\n\tdefaultBranch = trunk\n")
	c.read("a missing include target made", []string{`defaultbranch = "trunk"`}, true)

	os.MkdirAll(filepath.Join(c.home, ".config", "git"), 0o700)
	c.write(".config/git/config", "[pull]\n\trebase = true\n")
	c.read("the XDG file made", []string{`rebase = "true"`}, true)
	c.read("then unchanged", []string{`rebase = "true"`}, false)

	other := t.TempDir()
	os.WriteFile(filepath.Join(other, ".gitconfig"), []byte("[user]\n\tname = Cy\n"), 0o600)
	t.Setenv("HOME", other)
	c.read("another HOME", []string{`name = "Cy"`}, true)
}

// An edit that keeps the file's size and puts its mtime back still shows:
// its ctime moved, and no process can set that back.
func TestGitCacheSeesMtimeSetBack(t *testing.T) {
	c := newGitCacheCase(t)
	c.read("first start", []string{`email = "ann@example.com"`}, true)
	more := filepath.Join(c.home, "more")
	fi, _ := os.Stat(more)
	time.Sleep(20 * time.Millisecond) // past the filesystem's clock's tick
	c.write("more", "[user]\n\temail = eve@example.com\n")
	os.Chtimes(more, fi.ModTime(), fi.ModTime())
	c.read("same size, mtime set back", []string{`email = "eve@example.com"`}, true)
}

// A cache that cannot be written, or holds something else, or a run whose
// files changed just now, still gives the right settings, from git.
func TestGitCacheUnusable(t *testing.T) {
	c := newGitCacheCase(t)
	blocker := filepath.Join(t.TempDir(), "file")
	os.WriteFile(blocker, nil, 0o600)
	c.cache = filepath.Join(blocker, "git-settings") // its directory is a file
	c.read("unwritable, first", []string{`name = "Ann"`}, true)
	c.read("unwritable, again", []string{`name = "Ann"`}, true)

	c.cache = filepath.Join(t.TempDir(), "git-settings")
	for _, junk := range []string{"", "not a cache\n", gitCacheHeader + "out !!!\n", gitCacheHeader + "file \"x\nout \n"} {
		os.WriteFile(c.cache, []byte(junk), 0o600)
		c.read("a cache of "+junk, []string{`name = "Ann"`}, true)
		os.Remove(c.cache)
	}

	gitCacheSettle = time.Hour // every file changed "just now"
	c.read("files just changed", []string{`name = "Ann"`}, true)
	c.read("files just changed, again", []string{`name = "Ann"`}, true)
	if _, err := os.Stat(c.cache); err == nil {
		t.Error("a run whose files had just changed was kept")
	}
}

// Only gitSettings are kept, and a listing with an entry of another scope
// or origin, or an include mosaic cannot resolve as git does, is not kept.
func TestParseGitList(t *testing.T) {
	rec := func(scope, origin, kv string) string { return scope + "\x00" + origin + "\x00" + kv + "\x00" }
	env := []string{"HOME=/h"}
	list := rec("global", "file:/h/.gitconfig", "user.name\nAnn") + rec("global", "file:/h/.gitconfig", "credential.helper\nstore") +
		rec("global", "file:/h/.gitconfig", "include.path\nsub/inc") + rec("global", "file:/h/sub/inc", "includeIf.gitdir:/w/.path\n~/w.inc") +
		rec("global", "file:/h/sub/inc", "core.bare")
	out, files, err := parseGitList([]byte(list), env)
	if err != nil || string(out) != "global\x00user.name\nAnn\x00" {
		t.Errorf("out %q, err %v", out, err)
	}
	for _, f := range []string{"/etc/gitconfig", "/h/.config/git/config", "/h/.gitconfig", "/h/sub/inc", "/h/w.inc", "/.git"} {
		if !strings.Contains(strings.Join(files, " "), f) {
			t.Errorf("%s is not among %q", f, files)
		}
	}
	for _, bad := range []string{rec("local", "file:/.git/config", "user.name\nx"), rec("command", "command line:", "user.name\nx"),
		rec("global", "file:/h/.gitconfig", "include.path\n~bob/x"), rec("global", "file:/h/.gitconfig", "include.path\n%(prefix)/x")} {
		if _, _, err := parseGitList([]byte(list+bad), env); err == nil {
			t.Errorf("%q: kept", bad)
		}
	}
}

// A cache is another mosaic's too (an upgrade, a second build in the
// user's PATH: one runtime directory), and what it keeps is only the
// settings its writer took: a mosaic that takes more must not read a cache
// that lacks them, however unchanged the user's files.
func TestGitCacheKeptByAnotherSettingsList(t *testing.T) {
	c := newGitCacheCase(t)
	c.write(".gitconfig", "[user]\n\tname = Ann\n[init]\n\tdefaultBranch = trunk\n")
	settings := gitSettings
	t.Cleanup(func() { gitSettings = settings })
	var fewer []string
	for _, k := range settings {
		if k != "init.defaultbranch" {
			fewer = append(fewer, k)
		}
	}
	gitSettings = fewer // the mosaic before, without init.defaultbranch
	c.read("the older mosaic's start", []string{`name = "Ann"`}, true)
	gitSettings = settings
	c.read("this mosaic's start, files unchanged", []string{`name = "Ann"`, `defaultbranch = "trunk"`}, true)
	c.read("then again", []string{`defaultbranch = "trunk"`}, false)
}

// A relative HOME or XDG_CONFIG_HOME names a file under / to git, which
// runs there, and one under mosaic's own directory (a workspace, often)
// to the key: such a run is not kept.
func TestParseGitListRelativeHome(t *testing.T) {
	list := "global\x00file:h/.gitconfig\x00user.name\nAnn\x00"
	for _, env := range [][]string{{"HOME=h"}, {"HOME=/h", "XDG_CONFIG_HOME=cfg"}} {
		if _, _, err := parseGitList([]byte(list), env); err == nil {
			t.Errorf("%q: kept", env)
		}
	}
	if _, _, err := parseGitList([]byte("global\x00file:/h/.gitconfig\x00user.name\nAnn\x00"), []string{"HOME=/h"}); err != nil {
		t.Errorf("an absolute HOME: %v", err)
	}
}
