package request

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"mosaic/internal/errcode"
	"mosaic/sandbox"
)

// A toolchain is bound read-only where it is installed, and an install
// prefix holds, beside what runs, the configuration its tools read there:
// npm's global config is PREFIX/etc/npmrc (where `npm config set
// --location=global` writes a registry token), pip's site config is
// PREFIX/pip.conf in a venv or a pyenv/asdf/mise Python, gem's is
// PREFIX/etc/gemrc, Maven's PREFIX/conf/settings.xml, cargo's (a CARGO_HOME
// installed as /opt/cargo) PREFIX/credentials.toml. The deny-list names the
// user's own (~/.npmrc); these are the same files inside an install.
//
// So a toolchain's directory is not bound whole: its entries are, each at
// its own path, but those prefixSecrets names, and a directory on the way to
// one (etc/ for etc/npmrc) is not bound but made of its entries in turn. A
// secret's file is then absent inside whether it exists at the start or is
// written later (the directory the session sees at PREFIX or PREFIX/etc is
// not the host's, only its other entries are), and in every sandbox mode
// alike: bwrap, a --scope and --sandbox landlock (whose rules grant only
// the entries) all take the same list of paths.

// prefixSecrets are the files, relative to an install prefix, that a tool
// reads as its configuration and that can carry a credential. One ending
// in / is a directory; any other is hidden only where it is not one (a
// toolchain's own config/ directory of defaults is not cargo's config).
var prefixSecrets = []string{
	"etc/npmrc",    // npm's global config (nvm, fnm, volta, n, asdf, mise, Homebrew's node)
	"etc/gemrc",    // gem's system-wide config in a Ruby prefix
	"etc/yarnrc",   // yarn 1's global config in a node prefix
	"etc/pip.conf", // pip's site config where a prefix keeps it under etc/
	"pip.conf",     // pip's site config in a venv, pyenv, asdf or mise Python
	"pip.ini",      // the same, as pip names it on Windows-made venvs
	".condarc",     // conda's config in an environment: channel tokens
	"condarc",
	"conf/settings.xml",          // Maven's global settings: server passwords
	"conf/settings-security.xml", // Maven's master password
	"config",                     // cargo's config in a CARGO_HOME bound as a prefix
	"config.toml",
	"credentials", // cargo's registry tokens (before cargo 1.46)
	"credentials.toml",
	"auth.json",         // composer's tokens in a COMPOSER_HOME
	"gradle.properties", // Gradle's: repository credentials
	".npmrc",
	".yarnrc",
	".yarnrc.yml",
	".pypirc",
	".gemrc",
	".netrc",
	".git-credentials",
	".docker/", // config.json: registry credentials (a directory: the / says so)
}

// maxPrefixBinds bounds the binds one toolchain's directory is made of, so
// that a prefix of thousands of entries is refused with its reason, not
// bound as thousands of mounts.
const maxPrefixBinds = 512

// hidePrefixSecrets are the binds that show the toolchain directory c but
// its prefixSecrets (and those of each install prefix lying at one of
// nested, patterns whose * match one path element: pyenv's versions/*),
// and what was left out for another reason than being a secret. A bin/
// directory (programs, no configuration) and /nix/store (world-readable by
// design, and thousands of entries) are bound whole, as is a file.
func hidePrefixSecrets(c checked, nested []string, deny []Deny) ([]checked, []string) {
	if weakened || !c.dir || c.real == "/nix/store" || filepath.Base(c.real) == "bin" || filepath.Base(c.real) == "sbin" {
		return []checked{c}, nil
	}
	var patterns [][]string
	for _, at := range append([]string{""}, nested...) {
		for _, s := range prefixSecrets {
			patterns = append(patterns, strings.Split(strings.TrimPrefix(at+"/"+s, "/"), "/"))
		}
	}
	var out []checked
	var dropped []string
	var walk func(dir string, patterns [][]string) error
	walk = func(dir string, patterns [][]string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			path := filepath.Join(dir, e.Name())
			secret, sub := matchSecrets(e.Name(), e.Type(), patterns)
			switch {
			case secret:
				continue
			case len(sub) > 0 && e.IsDir():
				if err := walk(path, sub); err != nil {
					return err
				}
				continue
			case len(sub) > 0 && e.Type()&os.ModeSymlink != 0:
				// A link where a secret may lie beneath (pyenv's
				// versions/3.12 -> elsewhere): what it leads to is a
				// prefix bound whole, secrets and all, so it is left out.
				// One leading into c (mise's installs/node/20 ->
				// 20.11.0) is shown by what it leads to.
				if real, err := filepath.EvalSymlinks(path); err != nil || !sandbox.Within(real, c.real) {
					dropped = append(dropped, fmt.Sprintf("%s: left out of the toolchain's bind: a link to a prefix that may hold a tool's credentials; bind what it leads to with a profile's Toolchain= to keep it", path))
				}
				continue
			}
			if len(out) >= maxPrefixBinds {
				return fmt.Errorf("more than %d entries to bind", maxPrefixBinds)
			}
			b, err := checkPath(path, "toolchain", errcode.BadBind, deny)
			if err != nil {
				dropped = append(dropped, fmt.Sprintf("%s: left out of the toolchain's bind: %v", path, strings.TrimPrefix(err.Error(), "toolchain ")))
				continue
			}
			if b.real != path && sandbox.Within(b.real, c.real) {
				continue // a link inside the prefix: what it leads to is bound, or is a secret
			}
			out = append(out, b)
		}
		return nil
	}
	if err := walk(c.real, patterns); err != nil {
		return nil, []string{fmt.Sprintf("%s: not bound: %v, and it may hold a tool's credentials (%s); bind what the toolchain needs with --ro", c.real, err, strings.Join(prefixSecrets[:3], ", "))}
	}
	return out, dropped
}

// matchSecrets matches one directory entry (its name and type) against
// patterns (each a path split into elements): secret when one ends at it
// (a file's at anything but a directory, a directory's at a directory or
// a link), else the rest of each pattern that goes on beneath it.
func matchSecrets(name string, typ os.FileMode, patterns [][]string) (secret bool, sub [][]string) {
	dir := typ.IsDir()
	for _, p := range patterns {
		if p[0] != "*" && p[0] != name {
			continue
		}
		if len(p) == 1 {
			if !dir {
				return true, nil
			}
			continue
		}
		if len(p) == 2 && p[1] == "" { // a directory's pattern: "x/" split
			if dir || typ&os.ModeSymlink != 0 {
				return true, nil
			}
			continue
		}
		sub = append(sub, p[1:])
	}
	return false, sub
}
