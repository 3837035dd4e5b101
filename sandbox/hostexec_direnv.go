package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/units/regfile"
)

// What an .envrc has direnv take from the workspace. direnv approves an
// .envrc by its path and content, and nothing else: what it loads (a
// dotenv's .env, a `source .venv/bin/activate`, the shell.nix whose
// shellHook `use nix` runs) and the directories it puts on PATH
// (PATH_add bin, layout node's node_modules/.bin, layout python's
// .direnv/python-*/bin) are read again at every cd without a question. A
// session that appends to .venv/bin/activate, or leaves a bin/git there,
// has the host run it as soon as the user's shell enters the directory
// (the prompt runs git). The files are protected like the other
// host-executed entries (read-only at the top, moved aside when changed
// below it); in the PATH directories, what the session made or changed
// that shadows a program of the host's PATH is moved aside when it ends:
// the user typing git, or the prompt running it, means the host's git,
// while a name only the project provides (eslint) is the project's own
// tool, run when the user chooses to, like `npm test`.

// envrcRead is what one .envrc names, as absolute paths inside ws.
type envrcRead struct {
	loads []string // files direnv reads as code or environment
	path  []string // directories direnv puts on PATH
}

// direnvLayouts are the directories each `layout NAME` of direnv's stdlib
// puts on PATH, relative to the .envrc's directory; a component may be a
// pattern (python-3.11).
var direnvLayouts = map[string][]string{
	"node":    {"node_modules/.bin"},
	"php":     {"vendor/bin"},
	"go":      {".direnv/go/bin"},
	"perl":    {".direnv/perl5/bin"},
	"python":  {".direnv/python-*/bin", ".direnv/virtualenv/bin"},
	"python2": {".direnv/python-*/bin", ".direnv/virtualenv/bin"},
	"python3": {".direnv/python-*/bin", ".direnv/virtualenv/bin"},
	"ruby":    {".direnv/ruby*/bin", ".direnv/bin"},
}

// readEnvrc reads the .envrc of the directory rel of ws: the files it
// loads (dotenv and dotenv_if_exists, .env by default; source_env and
// source_env_if_exists, a directory's .envrc; source and .; use nix's
// shell.nix or default.nix, use flake's flake.nix and flake.lock) and the
// directories it puts on PATH (PATH_add, path_add PATH, an export PATH=
// or PATH= line, layout, a sourced bin/activate's directory). Only literal
// paths, or ones starting with $PWD (the .envrc's directory), are read;
// ones with another variable are not followed.
func readEnvrc(ws, rel string) envrcRead {
	var r envrcRead
	dir := filepath.Join(ws, rel)
	b, err := regfile.Read(filepath.Join(dir, ".envrc"), true, 1<<20)
	if err != nil {
		return r
	}
	add := func(list *[]string, p string) {
		p = strings.Trim(p, `"'`)
		for _, pwd := range []string{"$PWD", "${PWD}", "$(pwd)"} {
			if rest, ok := strings.CutPrefix(p, pwd); ok && (rest == "" || rest[0] == '/') {
				p = dir + rest // direnv runs an .envrc in its own directory
			}
		}
		if p == "" || strings.ContainsAny(p, "$`") || strings.HasPrefix(p, "~") {
			return
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if p = filepath.Clean(p); p != ws && Within(p, ws) && len(*list) < 100 {
			*list = append(*list, p)
		}
	}
	for _, line := range strings.Split(string(b), "\n") {
		for _, f := range envrcCommands(line) {
			loads, path := envrcLine(dir, f)
			for _, p := range loads {
				add(&r.loads, p)
			}
			for _, p := range path {
				add(&r.path, p)
			}
		}
	}
	r.path = expandLayouts(ws, r.path)
	return r
}

// envrcCommands splits a line of an .envrc into its commands' words: at
// ;, &&, || and |, without the keywords that lead one (if, then, do, !,
// ...), up to a comment. One-line conditionals are common (`if [ -f
// .venv/bin/activate ]; then source .venv/bin/activate; fi`, `test -d bin
// && PATH_add bin`): reading a line's first command only, the source and
// PATH_add after it went unseen.
func envrcCommands(line string) [][]string {
	var cmds [][]string
	var cur []string
	end := func() {
		if len(cur) > 0 {
			cmds = append(cmds, cur)
		}
		cur = nil
	}
	for _, w := range strings.Fields(line) {
		if strings.HasPrefix(w, "#") {
			break
		}
		switch w {
		case ";", "&&", "||", "|", "&":
			end()
			continue
		}
		last := strings.HasSuffix(w, ";")
		if w = strings.TrimSuffix(w, ";"); len(cur) == 0 && shellKeywords[w] {
			w = ""
		}
		if w != "" {
			cur = append(cur, w)
		}
		if last {
			end()
		}
	}
	end()
	return cmds
}

// shellKeywords lead a command without being it.
var shellKeywords = map[string]bool{"if": true, "then": true, "else": true, "elif": true, "do": true, "while": true, "until": true, "!": true, "{": true, "(": true}

// envrcLine is what one command of an .envrc (its words f) loads and
// puts on PATH, as written (relative to dir).
func envrcLine(dir string, f []string) (loads, path []string) {
	arg := func(i int) string {
		if len(f) > i {
			return f[i]
		}
		return ""
	}
	if v, ok := strings.CutPrefix(f[0], "PATH="); ok {
		return nil, strings.Split(strings.Trim(v, `"'`), ":") // PATH=$PWD/bin:$PATH
	}
	switch f[0] {
	case "dotenv", "dotenv_if_exists":
		if p := arg(1); p != "" {
			return []string{p}, nil
		}
		return []string{".env"}, nil
	case "source_env", "source_env_if_exists":
		p := arg(1)
		if st, err := os.Stat(filepath.Join(dir, p)); p != "" && err == nil && st.IsDir() {
			p = filepath.Join(p, ".envrc")
		}
		return []string{p}, nil
	case "source", ".":
		p := arg(1)
		if filepath.Base(p) == "activate" {
			// A virtual environment's activate puts its bin on PATH.
			path = []string{filepath.Dir(p)}
		}
		return []string{p}, path
	case "use", "use_nix", "use_flake":
		kind := strings.TrimPrefix(f[0], "use_")
		if f[0] == "use" {
			kind, f = arg(1), f[1:]
		}
		switch p := arg(1); {
		case kind == "nix" && p == "":
			return []string{"shell.nix", "default.nix"}, nil
		case kind == "nix" && !strings.HasPrefix(p, "-"):
			return []string{p}, nil
		case kind == "flake" && (p == "" || strings.HasPrefix(p, ".")):
			return []string{"flake.nix", "flake.lock"}, nil
		}
	case "PATH_add":
		return nil, f[1:]
	case "export":
		// export PATH="$PWD/bin:$PATH"
		if v, ok := strings.CutPrefix(arg(1), "PATH="); ok {
			return nil, strings.Split(strings.Trim(v, `"'`), ":")
		}
	case "path_add":
		if arg(1) == "PATH" {
			return nil, f[2:]
		}
	case "layout":
		return nil, direnvLayouts[arg(1)]
	}
	return nil, nil
}

// expandLayouts expands the patterns among the absolute paths ps (a
// component with "*"), listing the directory before it following no
// symlink; each path stays inside ws.
func expandLayouts(ws string, ps []string) []string {
	var out []string
	for _, p := range ps {
		i := strings.Index(p, "*")
		if i < 0 {
			out = append(out, p)
			continue
		}
		parent := filepath.Dir(p[:i+1])
		pattern, rest, _ := strings.Cut(strings.TrimPrefix(p, parent+"/"), "/")
		entries, err := readDirBeneath(ws, strings.TrimPrefix(parent, ws+"/"), 1000)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if ok, _ := filepath.Match(pattern, e.Name()); ok {
				out = append(out, filepath.Join(parent, e.Name(), rest))
			}
		}
	}
	return out
}

// Reasons of what an .envrc names, when moved aside.
const (
	envrcPathReason = "direnv puts its directory on your PATH when your shell enters the directory (the .envrc's PATH_add or layout), and it shadows the host's program of that name (a shell prompt runs git)"
)

// maxPathDirEntries bounds the entries of one PATH directory looked at.
const maxPathDirEntries = 20000

// moveAsideEnvrc moves aside, for the .envrc of the directory rel of ws,
// what the session changed since that direnv takes without asking: below
// the top the files it loads (the top's are bound read-only), and in the
// directories it puts on PATH each entry that shadows a host program.
func moveAsideEnvrc(ws, name, rel string, since time.Time) []MovedAside {
	r := readEnvrc(ws, rel)
	var moved []MovedAside
	if rel != "." {
		for _, p := range r.loads {
			p = strings.TrimPrefix(p, ws+"/")
			if c, _ := changedEntry(ws, p, since); c {
				moved = append(moved, moveAsideFor(ws, name, p, envrcReason)...)
			}
		}
	}
	for _, d := range r.path {
		moved = append(moved, moveAsideShadows(ws, name, strings.TrimPrefix(d, ws+"/"), since)...)
	}
	return moved
}

// moveAsideShadows moves aside the entries of the PATH directory dir (its
// path in ws) changed since that shadow a program of the host's PATH;
// the directory itself when it is (or passes through) a symlink the
// session made.
func moveAsideShadows(ws, name, dir string, since time.Time) []MovedAside {
	var moved []MovedAside
	entries, err := readDirBeneath(ws, dir, maxPathDirEntries)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			// A symlink on the way (or a file): the session's when it made
			// it; one of yours leads where you chose (not followed).
			if link := firstSymlink(ws, dir); link != "" {
				if c, _ := changedEntry(ws, link, since); c {
					return moveAsideFor(ws, name, link, envrcPathReason)
				}
			}
			return nil
		}
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return []MovedAside{{Path: dir, Reason: envrcPathReason, Error: fmt.Sprintf("cannot be looked through (%v), so what the session left on your PATH there was not checked", err)}}
	}
	host := hostPrograms(ws)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if !runsUnasked(e.Name()) && (!host[e.Name()] || projectLauncher(ws, dir, e)) {
			continue
		}
		if c, _ := changedEntry(ws, p, since); !c || linksOut(ws, p) {
			continue
		}
		moved = append(moved, moveAsideFor(ws, name, p, envrcPathReason)...)
	}
	return moved
}

// moveAsideFor moves aside ws/rel (MoveAsideCreated) with the reason given.
func moveAsideFor(ws, name, rel, reason string) []MovedAside {
	moved := MoveAsideCreated(ws, name, []string{rel})
	for i := range moved {
		moved[i].Reason = reason
	}
	return moved
}

// hostPath is the host's PATH without the directories inside ws, and
// the usual directories besides (the ended stage runs with the user
// manager's PATH, not the user's shell's): where the user's git is.
func hostPath(ws string) []string {
	home, _ := os.UserHomeDir()
	dirs := append(filepath.SplitList(os.Getenv("PATH")), "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
	if home != "" {
		dirs = append(dirs, filepath.Join(home, ".local", "bin"), filepath.Join(home, "bin"))
	}
	var out []string
	for _, d := range dirs {
		if filepath.IsAbs(d) && d != ws && !Within(d, ws) {
			out = append(out, d)
		}
	}
	return out
}

// hostPrograms are the names of the programs in the directories of
// hostPath(ws): each listed once (a stat of each PATH directory per entry
// took 120 µs; 5,000 new entries in a node_modules/.bin, 0.6 s).
func hostPrograms(ws string) map[string]bool {
	names := map[string]bool{}
	for _, d := range hostPath(ws) {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.Type().IsRegular() || e.Type()&os.ModeSymlink != 0 {
				names[e.Name()] = true
			}
		}
	}
	return names
}

// runsUnasked reports whether name is one a shell runs on entering a
// project without the user typing it: git (the prompt's), the interpreters
// whose version a prompt shows (python, node, ruby, go, rustc, cargo,
// java, php, perl: starship's and powerlevel10k's --version), and the
// names tools look up on PATH by themselves: the Go toolchain a go.mod's
// toolchain line names (any go command, the prompt's go version, runs
// go1.X.Y from PATH before it downloads one), git's external commands and
// filters (git-lfs at git status).
func runsUnasked(name string) bool {
	switch name {
	case "python", "python3", "node", "git", "ruby", "go", "rustc", "cargo", "java", "php", "perl":
		return true
	}
	return strings.HasPrefix(name, "go1.") || strings.HasPrefix(name, "git-")
}

// projectLauncher reports whether the entry e of the PATH directory dir
// (its path in ws) is the project's environment's own launcher, which the
// user runs by typing its name, as they run `npm test`: in a virtual
// environment's bin (its parent holds pyvenv.cfg), a regular file whose #!
// line names that environment's python (pip's and every entry point's
// launcher: #!WS/.venv/bin/python3); in a node_modules/.bin, npm's link to
// a package's file in that node_modules (../pkg/cli.js). Moving those
// aside broke the user's pip after the agent built the venv, while
// protecting little: the session can edit site-packages as well. A name
// that runsUnasked is moved aside all the same, launcher or not.
func projectLauncher(ws, dir string, e os.DirEntry) bool {
	p := filepath.Join(dir, e.Name())
	if filepath.Base(filepath.Dir(dir)) == "node_modules" && filepath.Base(dir) == ".bin" {
		target, err := os.Readlink(filepath.Join(ws, p))
		return err == nil && e.Type()&os.ModeSymlink != 0 && !filepath.IsAbs(target) &&
			strings.HasPrefix(filepath.Clean(filepath.Join(dir, target)), filepath.Dir(dir)+"/") &&
			!strings.HasPrefix(filepath.Clean(filepath.Join(dir, target)), dir+"/")
	}
	venv := filepath.Dir(dir)
	if filepath.Base(dir) != "bin" || !e.Type().IsRegular() {
		return false
	}
	if st, err := StatNoFollow(filepath.Join(ws, venv, "pyvenv.cfg")); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	b, err := regfile.Read(filepath.Join(ws, p), true, 1<<16)
	if err != nil {
		return false
	}
	bin := filepath.Join(ws, dir) + "/"
	first, rest, _ := strings.Cut(string(b), "\n")
	if python, ok := strings.CutPrefix(strings.TrimSpace(first), "#!"+bin); ok {
		return venvPython().MatchString(python)
	}
	// A path too long for #!, or with a blank: pip's launcher is then a
	// shell script that execs the python (#!/bin/sh, then '''exec' "PY" ...).
	second, _, _ := strings.Cut(rest, "\n")
	python, ok := strings.CutPrefix(second, `'''exec' "`+bin)
	python, _, quoted := strings.Cut(python, `" "$0" "$@"`)
	return strings.TrimSpace(first) == "#!/bin/sh" && ok && quoted && venvPython().MatchString(python)
}

// venvPython matches the names of a virtual environment's python in its
// bin: python, python3, python3.11. It is compiled at first use, not at
// every start of mosaic and its stages.
var venvPython = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^python(3(\.[0-9]+)?)?$`) })

// linksOut reports whether ws/rel is a symlink that leads out of ws to a
// file the user cannot write (a virtual environment's python ->
// /usr/bin/python3): what it runs is not the session's.
func linksOut(ws, rel string) bool {
	var st unix.Stat_t
	if unix.Lstat(filepath.Join(ws, rel), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return false
	}
	target, err := filepath.EvalSymlinks(filepath.Join(ws, rel))
	if err != nil || target == ws || Within(target, ws) {
		return false
	}
	return unix.Access(target, unix.W_OK) != nil
}
