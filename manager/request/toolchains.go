package request

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"mosaic/credentials"
	"mosaic/internal/errcode"
	"mosaic/sandbox"
)

// The session's PATH is the user's: each directory of it the session can
// see is kept, in order; a toolchain directory it cannot see yet (one
// outside the system directories, or a per-user installer's under the
// home) is bound read-only where it is installed, and so kept; every other
// one is dropped, and named in `mosaic status`. mosaic's own entries
// (sandbox.DefaultPath) follow. Only what runs is bound: a per-user
// installer's caches and credentials (~/.cargo/registry,
// ~/.cargo/credentials.toml) stay out, so a tool's caches live in the
// session's own home, and each bind passes the deny-list like --ro does.

// installer is a per-user installer's PATH directory under the home (Dir,
// a pattern whose * match one path element) and what it needs bound
// read-only to run (Binds, relative to the home; $1, $2 stand for what
// the *s matched).
type installer struct {
	Name  string
	Dir   string
	Binds []string
	// Prefixes are where, inside each of Binds, more install prefixes lie
	// (pyenv's versions/*), whose prefixSecrets are left out as well.
	Prefixes []string
}

// homeInstallers are the per-user installers mosaic knows, by the PATH
// directory they put under the home.
var homeInstallers = []installer{
	// rustup's proxies (cargo, rustc) run the toolchains under ~/.rustup;
	// ~/.cargo itself holds the registry cache and credentials.toml.
	{"rustup", ".cargo/bin", []string{".cargo/bin", ".rustup"}, nil},
	{"nvm", ".nvm/versions/node/*/bin", []string{".nvm/versions/node/$1"}, nil},
	{"fnm", ".local/share/fnm/node-versions/*/installation/bin", []string{".local/share/fnm/node-versions/$1/installation"}, nil},
	{"volta", ".volta/bin", []string{".volta/bin", ".volta/tools"}, []string{"image/*/*"}},
	{"pyenv", ".pyenv/shims", []string{".pyenv"}, []string{"versions/*"}},
	{"pyenv", ".pyenv/bin", []string{".pyenv"}, []string{"versions/*"}},
	{"rbenv", ".rbenv/shims", []string{".rbenv"}, []string{"versions/*"}},
	{"rbenv", ".rbenv/bin", []string{".rbenv"}, []string{"versions/*"}},
	{"asdf", ".asdf/shims", []string{".asdf"}, []string{"installs/*/*"}},
	{"asdf", ".asdf/bin", []string{".asdf"}, []string{"installs/*/*"}},
	{"mise", ".local/share/mise/shims", []string{".local/share/mise"}, []string{"installs/*/*"}},
	{"mise", ".local/share/mise/installs/*/*/bin", []string{".local/share/mise/installs/$1/$2"}, nil},
	{"sdkman", ".sdkman/candidates/*/*/bin", []string{".sdkman/candidates/$1/$2"}, nil},
	{"go install", "go/bin", []string{"go/bin"}, nil},
	{"go (golang.org/dl)", "sdk/*/bin", []string{"sdk/$1"}, nil},
	{"go (tarball)", ".local/go/bin", []string{".local/go"}, nil},
	// pip --user and pipx: the scripts, their packages (~/.local/lib) and
	// pipx's virtual environments, which its scripts link into.
	{"pip --user, pipx", ".local/bin", []string{".local/bin", ".local/lib", ".local/share/pipx/venvs"}, []string{"*"}},
	{"bun", ".bun/bin", []string{".bun/bin", ".bun/install/global"}, nil},
	{"deno", ".deno/bin", []string{".deno/bin"}, nil},
	// ~/.nix-profile/bin resolves into /nix/store (systemToolchainRoots).
}

// systemToolchainRoots are the places outside the home and the system
// directories where toolchains are installed: a PATH directory under one
// gets its install's prefix (the directory above bin/) bound read-only;
// /nix/store is bound whole (world-readable by design, and every
// store path refers to others).
var systemToolchainRoots = []string{"/opt", "/nix/store", "/home/linuxbrew/.linuxbrew"}

// userPath is the session's PATH and what it takes.
type userPath struct {
	Path    string    // the session's PATH
	Binds   []checked // read-only binds of toolchains, checked
	Roots   []string  // the toolchains' directories Binds show (less their prefixSecrets)
	Dropped []string  // "DIR: why", for each directory left out
}

// visibleFunc reports whether a resolved path is visible in the session
// (the system directories, the workspace, its binds).
type visibleFunc func(real string) bool

// sessionPath works out the session's PATH from path (the user's, or the
// one given with --env PATH=), toolchains (a profile's Toolchain=
// directories, added after it) and extra (the directories of the
// interpreters the command's #! names, perUserInstall's, put first). home is the user's; ownHome the
// session's own on the host, mounted at home inside.
func sessionPath(path string, toolchains, extra []string, home, ownHome string, visible visibleFunc, deny []Deny) userPath {
	var up userPath
	var dirs []string
	seen := map[string]bool{}
	keep := func(dir string) {
		if !seen[dir] {
			seen[dir] = true
			dirs = append(dirs, dir)
		}
	}
	bound := map[string]bool{}
	bind := func(c checked) {
		if !bound[c.real] {
			bound[c.real] = true
			up.Binds = append(up.Binds, c)
		}
	}
	rooted := map[string]bool{}
	bindRoot := func(r root) {
		if rooted[r.c.real] {
			return
		}
		rooted[r.c.real] = true
		up.Roots = append(up.Roots, r.c.real)
		binds, dropped := hidePrefixSecrets(r.c, r.prefixes, deny)
		for _, c := range binds {
			bind(c)
		}
		up.Dropped = append(up.Dropped, dropped...)
	}
	isVisible := func(real string) bool {
		if visible(real) {
			return true
		}
		for b := range rooted {
			if sandbox.Within(real, b) {
				return true
			}
		}
		return false
	}
	// The command's interpreter first, as its #! line found it.
	entries := append(append([]string{}, extra...), strings.Split(path, ":")...)
	// A profile's toolchains: each bound whole, where it passes the
	// deny-list, its bin/ after the user's PATH.
	for _, t := range toolchains {
		t = expandHome(t, home)
		c, err := checkPath(t, "toolchain", errcode.BadBind, deny)
		if err != nil {
			up.Dropped = append(up.Dropped, fmt.Sprintf("%s (the profile's Toolchain=): %v", t, strings.TrimPrefix(err.Error(), "toolchain ")))
			continue
		}
		bindRoot(root{c: c})
		if fi, err := os.Stat(filepath.Join(c.real, "bin")); err == nil && fi.IsDir() {
			entries = append(entries, filepath.Join(c.real, "bin"))
		} else {
			entries = append(entries, c.real)
		}
	}
	for _, dir := range entries {
		if seen[dir] {
			continue
		}
		inside, binds, why := placePathDir(dir, home, ownHome, isVisible, deny)
		if why != "" {
			if dir != "" {
				seen[dir] = true
			}
			up.Dropped = append(up.Dropped, fmt.Sprintf("%s: %s", shownDir(dir), why))
			continue
		}
		for _, r := range binds {
			bindRoot(r)
		}
		keep(inside)
	}
	for _, d := range strings.Split(sandbox.DefaultPath, ":") {
		keep(d)
	}
	up.Path = strings.Join(dirs, ":")
	return up
}

func shownDir(dir string) string {
	if dir == "" {
		return `"" (the current directory)`
	}
	return dir
}

// placePathDir decides one PATH directory: the path it has inside and
// the binds it needs, or why it is dropped.
func placePathDir(dir, home, ownHome string, visible visibleFunc, deny []Deny) (inside string, binds []root, why string) {
	if dir == "" || !filepath.IsAbs(dir) {
		return "", nil, "a relative directory, which would name a different one in each working directory"
	}
	dir = filepath.Clean(dir)
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		if ownHome != "" && sandbox.Within(dir, home) && dir != home {
			// Not in your home, but in the session's own (a kept home
			// where the agent installed a tool): there it is found.
			if fi, err := os.Lstat(filepath.Join(ownHome, strings.TrimPrefix(dir, home))); err == nil && fi.IsDir() {
				return dir, nil, ""
			}
		}
		return "", nil, "does not exist"
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", nil, "not a directory"
	}
	// The path as given works inside when it has no symlink of its own,
	// or only the system's (merged-/usr /bin -> usr/bin, which the
	// sandbox has too); else the real path is what is there.
	inside = real
	if systemFile(dir) {
		inside = dir
	}
	if strings.ContainsFunc(dir, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", nil, "holds a control character"
	}
	if d := denied(real, deny); d != nil {
		return "", nil, fmt.Sprintf("overlaps %s, %s", d.Path, d.Reason)
	}
	if visible(real) {
		return inside, nil, ""
	}
	roots, name, prefixes := toolchainRoots(real, home)
	if len(roots) == 0 {
		if sandbox.Within(real, home) {
			return "", nil, fmt.Sprintf("not a toolchain directory mosaic knows under your home; to keep it, bind it with --ro %s (or a profile's Toolchain=)", dir)
		}
		return "", nil, fmt.Sprintf("not visible in the session (not a system or known toolchain directory); to keep it, bind it with --ro %s", dir)
	}
	for i, r := range roots {
		if _, err := os.Lstat(r); err != nil && i > 0 {
			continue // an installer's optional part, not installed
		}
		c, err := checkPath(r, "toolchain", errcode.BadBind, deny)
		if err != nil {
			return "", nil, fmt.Sprintf("%s's %s cannot be bound: %v", name, r, strings.TrimPrefix(err.Error(), "toolchain "))
		}
		binds = append(binds, root{c, prefixes})
		if filepath.Base(r) == ".rustup" {
			for _, l := range linkedToolchains(c.real, deny) {
				binds = append(binds, root{c: l})
			}
		}
	}
	return inside, binds, ""
}

// root is one toolchain directory to bind read-only, and where inside it
// more install prefixes lie (installer.Prefixes).
type root struct {
	c        checked
	prefixes []string
}

// toolchainRoots are the directories a toolchain's PATH directory (real,
// resolved) needs bound, the installer's name and where inside them more
// install prefixes lie; none when real is not a toolchain's.
func toolchainRoots(real, home string) ([]string, string, []string) {
	if rel, err := filepath.Rel(home, real); err == nil && sandbox.Within(real, home) && real != home {
		for _, in := range homeInstallers {
			m, ok := matchDir(in.Dir, rel)
			if !ok {
				continue
			}
			var roots []string
			for _, b := range in.Binds {
				for i, v := range m {
					b = strings.ReplaceAll(b, fmt.Sprintf("$%d", i+1), v)
				}
				roots = append(roots, filepath.Join(home, b))
			}
			return roots, in.Name, in.Prefixes
		}
		return nil, "", nil
	}
	for _, root := range systemToolchainRoots {
		if !sandbox.Within(real, root) || real == root {
			continue
		}
		if root == "/nix/store" {
			return []string{root}, "nix", nil
		}
		prefix := real
		if b := filepath.Base(real); b == "bin" || b == "sbin" {
			prefix = filepath.Dir(real)
		}
		if prefix == root {
			prefix = real // /opt/bin: that directory alone, never all of /opt
		}
		return []string{prefix}, filepath.Base(prefix), nil
	}
	return nil, "", nil
}

// matchDir matches rel (relative to the home) against an installer's
// pattern, element by element, and returns what each * matched.
func matchDir(pattern, rel string) ([]string, bool) {
	pp, rp := strings.Split(pattern, "/"), strings.Split(rel, "/")
	if len(pp) != len(rp) {
		return nil, false
	}
	var m []string
	for i := range pp {
		switch {
		case pp[i] == "*":
			if rp[i] == "" || rp[i] == "." || rp[i] == ".." {
				return nil, false
			}
			m = append(m, rp[i])
		case pp[i] != rp[i]:
			return nil, false
		}
	}
	return m, true
}

// linkedToolchains are the directories the toolchains `rustup toolchain
// link` made under rustupHome point to (symlinks in toolchains/), which
// rustup runs from there.
func linkedToolchains(rustupHome string, deny []Deny) []checked {
	entries, _ := os.ReadDir(filepath.Join(rustupHome, "toolchains"))
	var out []checked
	for _, e := range entries {
		if e.Type()&os.ModeSymlink == 0 {
			continue
		}
		target, err := filepath.EvalSymlinks(filepath.Join(rustupHome, "toolchains", e.Name()))
		if err != nil || sandbox.Within(target, rustupHome) {
			continue
		}
		if c, err := checkPath(target, "toolchain", errcode.BadBind, deny); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// expandHome expands a leading ~/ to home.
func expandHome(p, home string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	if p == "~" {
		return home
	}
	return p
}

// pathOf takes the session's PATH out of the grant's variables (a --env
// PATH= or --pass-env PATH the user gave) or the caller's environment,
// works out the session's own from it (sessionPath) and puts that in the
// grant's variables.
func pathOf(g *credentials.Grant, commandPath []string, p Paths, name, workspace string, ro, rw []checked, deny []Deny) userPath {
	path := os.Getenv("PATH")
	var rest []string
	for _, kv := range g.PassEnv {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
			continue
		}
		rest = append(rest, kv)
	}
	visible := func(real string) bool {
		if systemFile(real) || real == "/etc" || sandbox.Within(real, "/etc") || sandbox.Within(real, workspace) {
			return true
		}
		for _, c := range append(append([]checked{}, ro...), rw...) {
			if sandbox.Within(real, c.real) && c.dir {
				return true
			}
		}
		return false
	}
	up := sessionPath(path, g.Profile.Toolchains, commandPath, p.Home, filepath.Join(p.SessionDir(name), "home"), visible, deny)
	g.PassEnv = append(rest, "PATH="+up.Path)
	g.PassEnv = append(g.PassEnv, toolchainVars(os.LookupEnv, g.PassEnv, func(real string) bool {
		if visible(real) {
			return true
		}
		for _, r := range up.Roots {
			if sandbox.Within(real, r) {
				return true
			}
		}
		return false
	})...)
	return up
}

// locationVars are the variables that tell a toolchain where it is
// installed when that is not its default (RUSTUP_HOME=/opt/rustup for
// ~/.cargo/bin's proxies, sdkman's JAVA_HOME): the session gets each one
// set in the caller's environment whose directory it can see. Those naming
// where caches and credentials go (CARGO_HOME, GOPATH, npm's prefix) are
// not among them: there the session's own home is used.
var locationVars = []string{"RUSTUP_HOME", "GOROOT", "JAVA_HOME", "PYENV_ROOT", "RBENV_ROOT", "ASDF_DIR", "VOLTA_HOME", "SDKMAN_DIR", "BUN_INSTALL", "DENO_INSTALL"}

// toolchainVars are NAME=VALUE of the locationVars set by lookup, not in
// env already, that name a directory visible in the session.
func toolchainVars(lookup func(string) (string, bool), env []string, visible visibleFunc) []string {
	var out []string
	for _, name := range locationVars {
		v, ok := lookup(name)
		if !ok || !filepath.IsAbs(v) || hasVar(env, name) || !plainValue(v) {
			continue
		}
		if real, err := filepath.EvalSymlinks(v); err == nil && visible(real) {
			out = append(out, name+"="+v)
		}
	}
	return out
}
