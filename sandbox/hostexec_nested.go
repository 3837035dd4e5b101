package sandbox

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Host-executed entries below the workspace's top. rustup, cargo, npm and
// yarn look for their files from the directory they run in upwards, as git
// does for a repository, and an editor opened on a subfolder reads its
// .vscode or .idea: a rust-toolchain.toml a session leaves in
// crates/foo has the host run the toolchain it names when the user's shell
// prompt runs rustc --version there. The top's entries are bound read-only
// (HostExecEntries); the deeper ones are found by the walk at the
// session's end (gitrepos.go) and moved aside when they changed while it
// ran.

// nestedExec are the names looked for in every directory, each with the
// files of it that say what runs (its own name for a file).
var nestedExec = map[string][]string{
	"rust-toolchain.toml": {"rust-toolchain.toml"},
	"rust-toolchain":      {"rust-toolchain"},
	".cargo":              {".cargo/config.toml", ".cargo/config"},
	".npmrc":              {".npmrc"},
	".yarnrc.yml":         {".yarnrc.yml"},
	".yarnrc":             {".yarnrc"},
	".tool-versions":      {".tool-versions"},
	"mise.toml":           {"mise.toml"},
	".mise.toml":          {".mise.toml"},
	"mise.local.toml":     {"mise.local.toml"},
	".mise.local.toml":    {".mise.local.toml"},
	".mise":               {".mise/config.toml", ".mise/config.local.toml"},
	".config":             {".config/mise.toml", ".config/mise/config.toml", ".config/mise.local.toml", ".config/mise/config.local.toml", ".config/mise/conf.d/*.toml"},
	"mise":                {"mise/config.toml"},
	".rtx.toml":           {".rtx.toml"},
	".rtx.local.toml":     {".rtx.local.toml"},
	"uv.toml":             {"uv.toml"},
	".bundle":             {".bundle/config"},
	// An editor trusts a folder's subfolders with it: opening one runs
	// what its settings name (an interpreter's path) and its tasks.
	".vscode": {".vscode/settings.json", ".vscode/tasks.json", ".vscode/launch.json"},
	".idea":   {".idea/workspace.xml", ".idea/misc.xml", ".idea/runConfigurations"},
}

// miseProfiles are the names mise reads in every directory, the top's
// too, once the user sets MISE_ENV (mise.dev.toml and its local ones, in
// each of mise's places): patterns, since the profile is the user's
// choice, not known to mosaic; the fixed names they also match are
// protected as themselves.
var miseProfiles = map[string][]string{
	"mise.*.toml":  {"mise.*.toml"},
	".mise.*.toml": {".mise.*.toml"},
	"mise":         {"mise/config.*.toml"},
	".mise":        {".mise/config.*.toml"},
	".config":      {".config/mise.*.toml", ".config/mise/config.*.toml"},
}

// moveAsideNestedExec moves aside what changed since of the nestedExec
// entries of the directory rel of ws (below the top), and of the
// miseProfiles (at any depth), which holds the entries has.
func moveAsideNestedExec(ws, name, rel string, has map[string]os.FileMode, since time.Time) []MovedAside {
	var moved []MovedAside
	seen := map[string]bool{}
	for _, p := range nestedExecPaths(ws, rel, has) {
		if seen[p] {
			continue
		}
		seen[p] = true
		if c, _ := changedEntry(ws, p, since); c {
			moved = append(moved, moveAsideFor(ws, name, p, nestedReason(strings.TrimPrefix(p, rel+"/")))...)
		}
	}
	return moved
}

// nestedReason is the reason of the nested entry rel (relative to its
// directory): its own HostExecEntries one, else its directory's or first
// component's (.vscode/tasks.json, .config/mise/conf.d/x.toml), else
// mise's (a profile's mise.dev.toml).
func nestedReason(rel string) string {
	first, _, _ := strings.Cut(rel, "/")
	for _, r := range []string{rel, filepath.Dir(rel), first} {
		for _, e := range HostExecEntries {
			if e.Rel == r {
				return e.Reason
			}
		}
	}
	return miseReason
}

// nestedExecPaths are the paths (in ws) of the files of nestedExec (below
// the top) and miseProfiles that the directory rel, holding the entries
// has, holds; a file's pattern (conf.d/*.toml, mise.*.toml) is matched
// against its directory's entries, following no symlink.
func nestedExecPaths(ws, rel string, has map[string]os.FileMode) []string {
	var paths []string
	// add adds what entry, of type t, matching key of files, holds: itself
	// when a file of that name is read (or a symlink stands in for a
	// directory read), else the files of it read.
	add := func(files []string, key, entry string, t os.FileMode) {
		if !t.IsDir() {
			if files[0] == key || t&os.ModeSymlink != 0 {
				paths = append(paths, filepath.Join(rel, entry))
			}
			return
		}
		for _, f := range files {
			paths = append(paths, globBeneath(ws, filepath.Join(rel, f))...)
		}
	}
	for entry, t := range has {
		if files, ok := nestedExec[entry]; ok && rel != "." {
			add(files, entry, entry, t)
		}
		for key, files := range miseProfiles {
			if ok, _ := filepath.Match(key, entry); ok {
				add(files, key, entry, t)
			}
		}
	}
	if rel == "." {
		// The top's fixed names are bound read-only or watched.
		paths = slices.DeleteFunc(paths, func(p string) bool { return HostExecReason(p) != gitNamedReason })
	}
	return paths
}

// globBeneath is the paths in ws matching rel, whose last component may be
// a pattern, listing its directory following no symlink.
func globBeneath(ws, rel string) []string {
	dir, pattern := filepath.Split(rel)
	if !strings.Contains(pattern, "*") {
		return []string{rel}
	}
	entries, err := readDirBeneath(ws, filepath.Clean(dir), 1000)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if ok, _ := filepath.Match(pattern, e.Name()); ok {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// envrcReason is the reason of a file the workspace's .envrc loads.
const envrcReason = "direnv on the host loads it, without asking again, when your shell enters the directory (the .envrc names it: dotenv, source_env)"

// envrcLoads lists the files inside ws that its .envrc loads without
// direnv asking again (readEnvrc), absolute.
func envrcLoads(ws string) []string {
	return readEnvrc(ws, ".").loads
}

// venvPipReason is the reason of a virtual environment's pip.conf.
const venvPipReason = "pip in this virtual environment reads it over your own config (its site config): an index-url there has pip install fetch another index's packages, and run their builds"

// moveAsideVenvConfig moves aside the pip.conf of the virtual environment
// rel of ws (a directory holding pyvenv.cfg) when it changed since: pip
// run in the environment takes it over the user's own config, as npm
// takes a project's .npmrc, so the user's `pip install requests` would
// fetch (and build) what an index of the session's choosing serves.
func moveAsideVenvConfig(ws, name, rel string, since time.Time) []MovedAside {
	p := filepath.Join(rel, "pip.conf")
	if c, _ := changedEntry(ws, p, since); !c {
		return nil
	}
	return moveAsideFor(ws, name, p, venvPipReason)
}

// optionNameReason is why an entry whose name starts with "-", "+" or "@"
// is moved.
const optionNameReason = "its name starts with -, + or @, so a * of your shell passes it to a command as an option: tar cf backup.tar * ran a --checkpoint-action=exec=... the session named a file, vim * a +!cmd, gcc * the options of a file an @file named"

// optionLeads are the first characters of a name that a shell glob gives
// a command as other than a file: "-" an option; "+" vim's, less's and
// more's command to run (vim * ran +!cmd and +so.x, a script beside it);
// "@" gcc's, clang's, ld's and javac's file of options to read (gcc * ran
// the -wrapper an @opts named).
const optionLeads = "-+@"

// isOptionLike is optionLike; a unit test puts the check before atk6 in
// its place (a leading "-" alone), to show what that let through.
var isOptionLike = optionLike

// svelteRoute matches SvelteKit's route files (+page.svelte,
// +layout@(app).svelte, +page.server.ts, +error.svelte): a project's own,
// and no command to vim (E492). It is compiled at first use, not at every
// start of mosaic and its stages.
var svelteRoute = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\+(page|layout|server|error)(@[^./]*)?(\.server)?\.(svelte|js|ts)$`)
})

// optionLike reports whether the entry name, of type t, is one a shell
// glob gives a command as an option or a command (optionLeads); a
// directory starting with "@" (an npm scope, node_modules/@types) is no
// file of options, nor is a SvelteKit route file a command. So is a name
// a word of which, after a blank, is one (not a lone "-": "A - B.txt"):
// xargs splits the names it reads at blanks (and takes quotes), and `git
// ls-files | xargs sed -i s/a/b/` ran the command of a `z -e '1e cmd'`.
func optionLike(name string, t os.FileMode) bool {
	for _, w := range strings.Fields(name)[min(1, len(strings.Fields(name))):] {
		if w = strings.Trim(w, `'"`); len(w) > 1 && leadsLikeOption(w, 0) {
			return true
		}
	}
	return leadsLikeOption(name, t)
}

// leadsLikeOption is optionLike for the start of name alone.
func leadsLikeOption(name string, t os.FileMode) bool {
	switch {
	case name == "" || !strings.ContainsAny(name[:1], optionLeads):
		return false
	case name[0] == '@':
		return !t.IsDir()
	case name[0] == '+':
		return !svelteRoute().MatchString(name)
	}
	return true
}

// moveAsideOptionName moves aside the entry rel of ws, whose name is
// optionLike, when the session made or renamed it (changed since): a shell
// glob gives it to the command as an option (GNU tar's
// --checkpoint-action=exec runs a command; a -rf makes rm * recursive). Its
// new name starts with "_" (MoveAsideCreated), not one of optionLeads.
func moveAsideOptionName(ws, name, rel string, since time.Time) []MovedAside {
	if c, _ := changedEntry(ws, rel, since); !c {
		return nil
	}
	return moveAsideFor(ws, name, rel, optionNameReason)
}
