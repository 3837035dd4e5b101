package directfloor

import (
	"os"
	"path/filepath"
	"strings"

	"mosaic/internal/regfile"
	"mosaic/sandbox"
)

// What an .envrc has direnv load from the workspace. direnv approves an
// .envrc by its path and content, and nothing else: what it loads (a
// dotenv's .env, a `source .venv/bin/activate`, the shell.nix whose
// shellHook `use nix` runs) is read again at every cd without a question.
// A session that appends to .venv/bin/activate has the host run it as soon
// as the user's shell enters the directory. The files the top's .envrc
// loads are bound read-only like the other host-executed entries
// (hookExec); what is missing at the start is not protected.

// envrcReason is the reason of a file the workspace's .envrc loads.
const envrcReason = "direnv on the host loads it, without asking again, when your shell enters the directory (the .envrc names it: dotenv, source_env)"

// envrcLoads lists the files inside ws that its .envrc loads without
// direnv asking again, absolute: dotenv and dotenv_if_exists (.env by
// default), source_env and source_env_if_exists (a directory's .envrc),
// source and ., use nix's shell.nix or default.nix, use flake's flake.nix
// and flake.lock. Only literal paths, or ones starting with $PWD (the
// .envrc's directory), are read; ones with another variable are not
// followed.
func envrcLoads(ws string) []string {
	var loads []string
	b, err := regfile.Read(filepath.Join(ws, ".envrc"), true, 1<<20)
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		for _, f := range envrcCommands(line) {
			for _, p := range envrcLine(ws, f) {
				p = strings.Trim(p, `"'`)
				for _, pwd := range []string{"$PWD", "${PWD}", "$(pwd)"} {
					if rest, ok := strings.CutPrefix(p, pwd); ok && (rest == "" || rest[0] == '/') {
						p = ws + rest // direnv runs an .envrc in its own directory
					}
				}
				if p == "" || strings.ContainsAny(p, "$`") || strings.HasPrefix(p, "~") {
					continue
				}
				if !filepath.IsAbs(p) {
					p = filepath.Join(ws, p)
				}
				if p = filepath.Clean(p); p != ws && sandbox.Within(p, ws) && len(loads) < 100 {
					loads = append(loads, p)
				}
			}
		}
	}
	return loads
}

// envrcCommands splits a line of an .envrc into its commands' words: at
// ;, &&, || and |, without the keywords that lead one (if, then, do, !,
// ...), up to a comment. One-line conditionals are common (`if [ -f
// .venv/bin/activate ]; then source .venv/bin/activate; fi`, `test -f .env
// && dotenv`): reading a line's first command only, the source and the
// dotenv after it went unseen.
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

// envrcLine is what one command of an .envrc (its words f) loads, as
// written (relative to dir).
func envrcLine(dir string, f []string) []string {
	arg := func(i int) string {
		if len(f) > i {
			return f[i]
		}
		return ""
	}
	switch f[0] {
	case "dotenv", "dotenv_if_exists":
		if p := arg(1); p != "" {
			return []string{p}
		}
		return []string{".env"}
	case "source_env", "source_env_if_exists":
		p := arg(1)
		if st, err := os.Stat(filepath.Join(dir, p)); p != "" && err == nil && st.IsDir() {
			p = filepath.Join(p, ".envrc")
		}
		return []string{p}
	case "source", ".":
		return []string{arg(1)}
	case "use", "use_nix", "use_flake":
		kind := strings.TrimPrefix(f[0], "use_")
		if f[0] == "use" {
			kind, f = arg(1), f[1:]
		}
		switch p := arg(1); {
		case kind == "nix" && p == "":
			return []string{"shell.nix", "default.nix"}
		case kind == "nix" && !strings.HasPrefix(p, "-"):
			return []string{p}
		case kind == "flake" && (p == "" || strings.HasPrefix(p, ".")):
			return []string{"flake.nix", "flake.lock"}
		}
	}
	return nil
}
