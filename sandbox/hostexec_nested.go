package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"mosaic/units/regfile"
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
	// An editor trusts a folder's subfolders with it: opening one runs
	// what its settings name (an interpreter's path) and its tasks.
	".vscode": {".vscode/settings.json", ".vscode/tasks.json", ".vscode/launch.json"},
	".idea":   {".idea/workspace.xml", ".idea/misc.xml", ".idea/runConfigurations"},
}

// moveAsideNestedExec moves aside what changed since of the nestedExec
// entries of the directory rel of ws, which holds the entries has.
func moveAsideNestedExec(ws, name, rel string, has map[string]os.FileMode, since time.Time) []MovedAside {
	var moved []MovedAside
	for entry, files := range nestedExec {
		t, ok := has[entry]
		if !ok {
			continue
		}
		paths := []string{filepath.Join(rel, entry)}
		if t.IsDir() {
			paths = paths[:0]
			for _, f := range files {
				paths = append(paths, filepath.Join(rel, f))
			}
		}
		for _, p := range paths {
			if c, _ := changedEntry(ws, p, since); !c {
				continue
			}
			for _, m := range MoveAsideCreated(ws, name, []string{p}) {
				if m.Reason = HostExecReason(strings.TrimPrefix(p, rel+"/")); m.Reason == gitNamedReason {
					m.Reason = HostExecReason(entry)
				}
				moved = append(moved, m)
			}
		}
	}
	return moved
}

// envrcReason is the reason of a file the workspace's .envrc loads.
const envrcReason = "direnv on the host loads it, without asking again, when your shell enters the directory (the .envrc names it: dotenv, source_env)"

// envrcLoads lists the files inside ws that its .envrc loads without
// direnv asking again (direnv approves the .envrc itself, by its content):
// dotenv and dotenv_if_exists (.env by default: a PATH or LD_PRELOAD there
// runs the session's programs at the user's next command), source_env and
// source_env_if_exists (a directory's .envrc). Only literal paths are
// read; ones with a variable are not followed.
func envrcLoads(ws string) []string {
	b, err := regfile.Read(filepath.Join(ws, ".envrc"), true, 1<<20)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimSpace(line))
		if len(f) == 0 {
			continue
		}
		var p string
		switch f[0] {
		case "dotenv", "dotenv_if_exists":
			p = ".env"
			if len(f) > 1 {
				p = f[1]
			}
		case "source_env", "source_env_if_exists":
			if len(f) < 2 {
				continue
			}
			p = f[1]
			if st, err := os.Stat(filepath.Join(ws, p)); err == nil && st.IsDir() {
				p = filepath.Join(p, ".envrc")
			}
		default:
			continue
		}
		p = strings.Trim(p, `"'`)
		if strings.ContainsAny(p, "$`") || strings.HasPrefix(p, "~") {
			continue
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(ws, p)
		}
		if p = filepath.Clean(p); p != ws && Within(p, ws) && len(out) < 100 {
			out = append(out, p)
		}
	}
	return out
}
