package request

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"mosaic/internal/errcode"
	"mosaic/sandbox"
)

// The path policy: one deny-list for the workspace and every --ro/--rw
// path, applied to the resolved path; a path given through a symlink that a
// session could have planted is refused; and what was checked is recorded by
// identity (sandbox.BindID) so that the sandbox's layers can tell it is what
// they mounted.

// Deny is one place no workspace or bind may overlap.
type Deny struct {
	Path   string
	Reason string
	// Inside also refuses a path inside Path, not only one that contains
	// it. The home is the one entry without: projects live inside it.
	Inside bool
	real   string // Path resolved, when that differs (DenyList fills it in)
}

// DenyFile is the user's own additions to the deny-list, in the config
// directory: one path a line (~/ is the home, a relative path is relative to
// the home), `#` starts a comment, the text after a path's `#` is its reason.
const DenyFile = "deny.conf"

// homeDeny are the entries under the home, with their reasons.
var homeDeny = []struct{ rel, reason string }{
	// The agents' own state: sign-ins, tokens, history.
	{".claude", "Claude Code's sign-in and history"},
	{".claude.json", "Claude Code's account and settings"},
	{".codex", "Codex's sign-in and history"},
	{".pi", "Pi's sign-in and history"},
	{".config/opencode", "OpenCode's settings"},
	{".local/share/opencode", "OpenCode's sign-in and history"},
	// What the user's session manager and systemd run unconfined later.
	{".config/systemd", "user units: one written there runs unconfined at the next login or daemon-reload"},
	{".local/share/systemd", "user units: one written there runs unconfined at the next login or daemon-reload"},
	{".config/environment.d", "the user manager's environment, read by every later unit"},
	{".config/autostart", "programs the desktop starts at login, unconfined"},
	// Shell and tool start-up files the host runs.
	{".bashrc", "a shell start-up file: the user's next shell runs it"},
	{".bash_profile", "a shell start-up file: the user's next shell runs it"},
	{".bash_login", "a shell start-up file: the user's next shell runs it"},
	{".bash_logout", "a shell start-up file: the user's next shell runs it"},
	{".profile", "a shell start-up file: the user's next login runs it"},
	{".zshrc", "a shell start-up file: the user's next shell runs it"},
	{".zshenv", "a shell start-up file: the user's next shell runs it"},
	{".zprofile", "a shell start-up file: the user's next shell runs it"},
	{".zlogin", "a shell start-up file: the user's next shell runs it"},
	{".zlogout", "a shell start-up file: the user's next shell runs it"},
	{".config/fish", "fish's start-up files: the user's next shell runs them"},
	{".inputrc", "readline's start-up file, read by every interactive shell"},
	{".pam_environment", "the login environment"},
	{".xprofile", "run by the display manager at login"},
	{".xsessionrc", "run by the X session at login"},
	{".gitconfig", "git's global config: core.fsmonitor, hooksPath and aliases run programs on the host"},
	{".config/git", "git's global config: core.fsmonitor, hooksPath and aliases run programs on the host"},
	// The well-known homes of secrets.
	{".ssh", "SSH keys"},
	{".aws", "AWS credentials"},
	{".gnupg", "GnuPG keys"},
	{".kube", "Kubernetes credentials"},
	{".docker", "Docker registry credentials"},
	{".netrc", "passwords for hosts"},
	{".git-credentials", "git's stored passwords"},
	{".config/gh", "the GitHub CLI's token"},
	{".config/gcloud", "Google Cloud credentials"},
	{".azure", "Azure credentials"},
	{".npmrc", "npm's registry tokens"},
	{".pypirc", "PyPI's upload tokens"},
	{".cargo/credentials.toml", "cargo's registry tokens"},
	{".cargo/credentials", "cargo's registry tokens (the name before cargo 1.46)"},
	{".config/pip", "pip's configuration, which may hold an index URL with a token"},
	{".local/share/keyrings", "the desktop keyring"},
	{".password-store", "pass's password store"},
}

// DenyList is the deny-list for the user's paths: the built-in entries and
// the user's DenyFile.
func DenyList(p Paths) ([]Deny, error) {
	list := []Deny{
		{Path: p.Home, Reason: "your home directory (~/.ssh, ~/.aws, every checkout)"},
		{Path: p.RuntimeDir, Reason: "the runtime directory, which holds the user bus and systemd's socket (a session could start unconfined units)", Inside: true},
		{Path: p.StateRoot, Reason: "mosaic's session state (other sessions' homes)", Inside: true},
		{Path: filepath.Join(p.config(), "mosaic"), Reason: "mosaic's configuration: its profiles, policy and the bus's credentials", Inside: true},
		{Path: "/proc", Reason: "the host's processes and their command lines", Inside: true},
		{Path: "/sys", Reason: "the kernel's and the host's devices' settings", Inside: true},
		{Path: "/dev", Reason: "the host's devices", Inside: true},
	}
	for _, e := range homeDeny {
		path := filepath.Join(p.Home, e.rel)
		if rest, ok := strings.CutPrefix(e.rel, ".config/"); ok {
			path = filepath.Join(p.config(), rest)
		}
		list = append(list, Deny{Path: path, Reason: e.reason, Inside: true})
	}
	user, err := readDenyFile(filepath.Join(p.config(), "mosaic", DenyFile), p.Home)
	list = append(list, user...)
	// Resolved once here, not for each path checked, so that an entry
	// that is itself a symlink (~/.ssh -> /secure/ssh) or lies under one
	// is found either way: each directory once, then one lstat an entry.
	dirs := map[string]string{}
	for i := range list {
		dir, base := filepath.Split(list[i].Path)
		rd, ok := dirs[dir]
		if !ok {
			rd = Resolve(dir)
			dirs[dir] = rd
		}
		r := filepath.Join(rd, base)
		if fi, err := os.Lstat(r); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			r = Resolve(r)
		}
		if r != list[i].Path {
			list[i].real = r
		}
	}
	return list, err
}

func (p Paths) config() string {
	if p.Config != "" {
		return p.Config
	}
	return filepath.Join(p.Home, ".config")
}

// readDenyFile reads the user's additions; a file that does not exist adds
// none. It opens only a regular file, without blocking (a FIFO in its place
// would hang every start).
func readDenyFile(path, home string) ([]Deny, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, errcode.BadConfig.New("%s: %w", path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errcode.BadConfig.New("%s is not a regular file", path)
	}
	var out []Deny
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for n := 1; sc.Scan(); n++ {
		line, reason, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "~/"); ok || line == "~" {
			line = filepath.Join(home, rest)
		} else if !filepath.IsAbs(line) {
			line = filepath.Join(home, line)
		}
		reason = strings.TrimSpace(reason)
		if reason == "" {
			reason = "listed in " + path
		}
		out = append(out, Deny{Path: filepath.Clean(line), Reason: reason, Inside: true})
	}
	if err := sc.Err(); err != nil {
		return nil, errcode.BadConfig.New("%s: %w", path, err)
	}
	return out, nil
}

// denied returns the entry of list that real (a resolved path) overlaps,
// or nil. An entry is compared as written and resolved.
func denied(real string, list []Deny) *Deny {
	if real == "/" {
		return &Deny{Path: "/", Reason: "the whole system"}
	}
	for i, d := range list {
		for _, path := range []string{d.Path, d.real} {
			if path != "" && (sandbox.Within(path, real) || (d.Inside && sandbox.Within(real, path))) {
				return &list[i]
			}
		}
	}
	return nil
}

// checked is one path that passed the policy.
type checked struct {
	real    string // resolved
	givenAs string // the absolute path as given, when it differs
	id      string // device:inode of what was checked
	dir     bool
}

// checkPath resolves path (relative to the working directory), refusing a
// symlink on the way that leads out of the directory it lives in when a
// session could have planted it; applies the deny-list to the real path;
// and reads the identity of what it names, without following a symlink.
// what names the path in errors ("workspace x", "--ro x").
func checkPath(path, what string, code errcode.Code, list []Deny) (checked, error) {
	abs := path
	if !filepath.IsAbs(path) {
		// The physical working directory: the user is already in it, and
		// how they got there is not a path they gave.
		cwd, err := unix.Getwd()
		if err != nil {
			return checked{}, code.New("%s: cannot read the working directory: %w", what, err)
		}
		abs = filepath.Join(cwd, path)
	}
	abs = filepath.Clean(abs)
	real, err := resolveGuarded(abs)
	if err != nil {
		return checked{}, code.New("%s: %w", what, err)
	}
	if d := denied(real, list); d != nil {
		shown := real
		if real != abs {
			shown = abs + " (" + real + ")"
		}
		return checked{}, code.New("%s %s overlaps %s, %s: a session must not see it; pass a project directory", what, shown, d.Path, d.Reason)
	}
	st, err := sandbox.StatNoFollow(real)
	if err != nil {
		return checked{}, code.New("%s %s changed while mosaic checked it (%w): try again, and check what else writes there", what, real, err)
	}
	c := checked{real: real, id: sandbox.StatID(st), dir: st.Mode&unix.S_IFMT == unix.S_IFDIR}
	if real != abs {
		c.givenAs = abs
	}
	return c, nil
}

// maxLinks bounds the symlinks one path may go through, as the kernel does.
const maxLinks = 40

// resolveGuarded resolves abs one component at a time. A symlink whose
// target leads out of the directory holding it is refused when the user can
// write that directory, since a session (whose workspace it may be) could
// have planted it there: ws/sub -> ~/.ssh. The user names the real path
// instead. Links in directories the user cannot write (/home -> /usr/home,
// the system's) are followed.
func resolveGuarded(abs string) (string, error) {
	cur := "/"
	rest := strings.Split(strings.TrimPrefix(abs, "/"), "/")
	links := 0
	for len(rest) > 0 {
		part := rest[0]
		rest = rest[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, part)
		fi, err := os.Lstat(next)
		if err != nil {
			if os.IsNotExist(err) {
				return "", fmt.Errorf("%s does not exist: create it or name an existing path", abs)
			}
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%s: too many levels of symlinks", abs)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(cur, target)
		}
		to, err := filepath.EvalSymlinks(target)
		if err != nil {
			return "", fmt.Errorf("%s is a symlink to %s, which does not exist", next, target)
		}
		if !sandbox.Within(to, cur) && unix.Access(cur, unix.W_OK) == nil {
			return "", fmt.Errorf("%s is a symlink to %s, out of %s, where a session could have planted it: if that is what you mean, name the real path %s", next, to, cur, filepath.Join(append([]string{to}, rest...)...))
		}
		cur = to
	}
	return cur, nil
}
