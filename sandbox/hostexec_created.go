package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/sys/unix"
)

// Host-executed entries a session creates. A read-only bind needs an object
// to mount over, and for most entries an empty stand-in would itself break
// the host's tools (an empty .envrc that direnv blocks, an empty .mcp.json
// that is not JSON, an empty .git/commondir that stops git). So the entries
// that were missing when the session started are watched instead: when it
// ends, whatever the session created there is moved aside (renamed, never
// deleted or read), so the host's tools do not run it, and mosaic says so.
// While the session runs, `mosaic status` lists what it has created.

// HostExecWatched are entries inside protected directories that git or an
// agent writes beside them, so they cannot be bound read-only, yet that
// redirect what the host runs: a .git/commondir file makes git read its
// config and hooks from any directory the session chose.
var HostExecWatched = []HostExec{
	{".git/commondir", "git on the host reads its config and hooks from the directory it names", false},
	{".git/config.worktree", "git on the host reads it as config when extensions.worktreeConfig is set", false},
	{".claude/settings.local.json", "Claude Code on the host runs the hooks it configures", false},
	{".git/" + rebaseTodo, "git on the host runs its exec lines at git rebase --continue (the rebase in progress, yours or one the session left)", false},
}

// promptReason is why a file of promptRead is moved aside.
const promptReason = "git's shell prompt prints it raw at every prompt in this repository, and it holds control bytes (an escape sequence for your terminal) that no ref name can"

// rebaseTodo is an in-progress rebase's todo list in a git directory: git
// runs the shell command of each of its exec lines at `git rebase
// --continue`, and the session can write it (.git is writable but for
// config and hooks).
const rebaseTodo = "rebase-merge/git-rebase-todo"

// watched are the entries checked for creation: the protected ones that
// have no placeholder, and HostExecWatched.
// The core.hooksPath directory inside ws is watched when missing.
func watched(ws string) []HostExec {
	var w []HostExec
	for _, e := range HostExecEntries {
		if !e.Placeholder {
			w = append(w, e)
		}
	}
	_, hooks := hookExec(ws)
	return append(append(w, HostExecWatched...), hooks...)
}

// MissingHostExec lists the watched entries of ws (its real path) that do
// not exist now: those a session could create. Called after ProtectHostExec,
// whose placeholders then exist.
func MissingHostExec(ws string) []string {
	var missing []string
	for _, e := range watched(ws) {
		var st unix.Stat_t
		err := unix.Lstat(filepath.Join(ws, e.Rel), &st)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			missing = append(missing, e.Rel)
		}
	}
	return missing
}

// HostExecReason is why rel is protected or watched; a path of no fixed
// entry is a submodule's link (MoveAsideRepos), the directory
// core.hooksPath names or a file an include names.
func HostExecReason(rel string) string {
	if strings.HasSuffix(rel, "/.git") || rel == ".git/index" {
		return "git status on the host runs git in this submodule, with its config"
	}
	for _, p := range promptRead {
		if rel == ".git/"+p {
			return promptReason
		}
	}
	all := append(append(append([]HostExec{}, HostExecEntries...), HostExecWatched...), hookEntries...)
	for _, e := range all {
		if e.Rel == rel {
			return e.Reason
		}
	}
	for _, e := range all {
		if strings.HasPrefix(e.Rel, rel+"/") {
			return "a symlink the host's tools follow to " + e.Rel + ": " + e.Reason
		}
	}
	return gitNamedReason
}

// gitNamedReason is why an entry that git's configuration names is
// protected (hookExec).
const gitNamedReason = "a tool on the host runs it or reads it as configuration, as a config of the workspace says (git: a hook, core.hooksPath, include.path; direnv: the .envrc's dotenv, source_env)"

// Created lists which of missing (MissingHostExec at the start) exist in ws
// now, without following any symlink on the way.
func Created(ws string, missing []string) []string {
	root := openRoot(ws)
	defer root.close()
	var made []string
	for _, rel := range missing {
		dir, base, err := root.dirOf(rel)
		if err != nil {
			// Through a symlink on the way: the symlink (MoveAsideCreated).
			if _, serr := os.Lstat(filepath.Join(ws, rel)); serr == nil && !errors.Is(err, unix.ENOENT) {
				if link := root.firstSymlink(filepath.Dir(rel)); link != "" && !slices.Contains(made, link) {
					made = append(made, link)
				}
			}
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			made = append(made, rel)
		}
		unix.Close(dir)
	}
	return made
}

// MovedAside is one created entry moved aside when its session ended.
type MovedAside struct {
	Path string `json:"path"`         // relative to the workspace
	To   string `json:"to,omitempty"` // the name it has now, beside it; empty when it could not be moved
	// Error says why it could not be moved; the entry is then still there.
	Error string `json:"error,omitempty"`
	// Disarmed are the entries of the git directories in it (HEAD,
	// config, hooks, ...) renamed *.mosaic-moved so that git takes none of
	// it for a repository (gitdisarm.go), relative to To.
	Disarmed []string `json:"disarmed,omitempty"`
	// Reason is why the host runs it, when its path alone does not say
	// (HostExecReason).
	Reason string `json:"reason,omitempty"`
}

// Why is why the host runs the entry.
func (m MovedAside) Why() string {
	if m.Reason != "" {
		return m.Reason
	}
	return HostExecReason(m.Path)
}

// MoveAsideCreated renames each entry of missing that exists in ws now to
// ENTRY.mosaic-moved-NAME-RANDOM beside it, never following a symlink on
// the way (the session chose every directory there) and never replacing
// anything. name is the session's.
func MoveAsideCreated(ws, name string, missing []string) []MovedAside {
	root := openRoot(ws)
	defer root.close()
	return moveAsideIn(ws, root, name, missing)
}

// moveAsideIn is MoveAsideCreated with ws opened once (root) for the
// lookups of all its entries.
func moveAsideIn(ws string, root wsRoot, name string, missing []string) []MovedAside {
	var moved []MovedAside
	for _, rel := range missing {
		dir, base, err := root.dirOf(rel)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			// A directory on the way that is a symlink (.claude ->
			// a directory of the session's): the host's tools follow
			// it to the entry, so it is what is moved aside; when the
			// entry is not there through it either, nothing runs.
			if _, err := os.Lstat(filepath.Join(ws, rel)); errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				continue
			}
			if link := root.firstSymlink(filepath.Dir(rel)); link != "" {
				for _, m := range moveAsideIn(ws, root, name, []string{link}) {
					m.Reason = fmt.Sprintf("a symlink on the way to %s, which the host's tools follow: %s", rel, HostExecReason(rel))
					moved = append(moved, m)
				}
				continue
			}
			moved = append(moved, MovedAside{Path: rel, Error: err.Error()})
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			unix.Close(dir)
			continue
		}
		var rnd [4]byte
		_, _ = rand.Read(rnd[:])
		to := base + ".mosaic-moved-" + name + "-" + hex.EncodeToString(rnd[:])
		if strings.ContainsAny(to[:1], optionLeads) {
			to = "_" + to // not an option to a command a shell glob gives it to
		}
		// Nor one after xargs splits it at its blanks (optionLike).
		to = strings.Map(func(r rune) rune {
			if unicode.IsSpace(r) {
				return '_'
			}
			return r
		}, to)
		m := MovedAside{Path: rel, To: filepath.Join(filepath.Dir(rel), to)}
		if err := unix.Renameat2(dir, base, dir, to, unix.RENAME_NOREPLACE); err != nil {
			m.To, m.Error = "", fmt.Sprintf("cannot move it aside: %v", err)
		} else if st.Mode&unix.S_IFMT == unix.S_IFDIR && !testKeepMovedArmed {
			m.Disarmed = disarmGitDirs(dir, to)
		}
		unix.Close(dir)
		moved = append(moved, m)
	}
	return moved
}

// firstSymlink is the first component of the directory rel (inside ws)
// that is a symlink, "" when none is.
func firstSymlink(ws, rel string) string {
	root := openRoot(ws)
	defer root.close()
	return root.firstSymlink(rel)
}

// firstSymlink is the first component of the directory rel (inside the
// root) that is a symlink, "" when none is.
func (b wsRoot) firstSymlink(rel string) string {
	parts := strings.Split(filepath.Clean(rel), "/")
	for i := range parts {
		p := filepath.Join(parts[:i+1]...)
		if p == "." {
			return ""
		}
		dir, base, err := b.dirOf(p)
		if err != nil {
			return ""
		}
		var st unix.Stat_t
		err = unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW)
		unix.Close(dir)
		if err != nil {
			return ""
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return p
		}
	}
	return ""
}

// openBeneath opens the directory holding rel inside ws, following no
// symlink and never leaving ws, and returns it with rel's last component.
func openBeneath(ws, rel string) (int, string, error) {
	root := openRoot(ws)
	defer root.close()
	return root.dirOf(rel)
}

// openatBeneath opens ws/rel with flags, following no symlink and never
// leaving ws.
func openatBeneath(ws, rel string, flags int) (int, error) {
	root := openRoot(ws)
	defer root.close()
	return root.openat(rel, flags)
}

// A wsRoot is a directory opened once for the lookups of several paths
// inside it (a session's workspace at its end: ~50 entries), each of them
// following no symlink and never leaving it; err is why it could not be
// opened, which each lookup then returns.
type wsRoot struct {
	fd  int
	err error
}

// openRoot opens ws, itself no symlink, for lookups beneath it; the caller
// closes it.
func openRoot(ws string) wsRoot {
	fd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	return wsRoot{fd: fd, err: err}
}

// close closes the directory, if it was opened.
func (b wsRoot) close() {
	if b.err == nil {
		unix.Close(b.fd)
	}
}

// dirOf opens the directory holding rel, and returns it with rel's last
// component.
func (b wsRoot) dirOf(rel string) (int, string, error) {
	if filepath.IsAbs(rel) || strings.Contains("/"+rel+"/", "/../") {
		return -1, "", fmt.Errorf("%s is not a path inside the workspace", rel)
	}
	dir, err := b.openat(filepath.Dir(rel), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, "", err
	}
	return dir, filepath.Base(rel), nil
}

// openat opens rel with flags.
func (b wsRoot) openat(rel string, flags int) (int, error) {
	if b.err != nil {
		return -1, b.err
	}
	return unix.Openat2(b.fd, rel, &unix.OpenHow{
		Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}
