package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/units/regfile"
)

// Submodules a session plants or changes. `git status` on the host runs git
// again in each submodule it finds: a gitlink in the index whose directory
// holds a .git, with that repository's config (core.fsmonitor). A session
// writes .git/index and the worktree, so it can add a gitlink, a sub/.git
// file pointing at a git directory of its own, or edit the config of a
// submodule's git directory (.git/modules/NAME/config): the host's next
// `git status` then runs what it wrote. The top repository's config and
// hooks are read-only, but these cannot be without stopping git in the
// session. So when the session ends, each submodule whose link (sub/.git),
// git directory or config changed while it ran (their ctime, which no
// process can set back) has its link moved aside: the host's git then sees
// an uninitialized submodule and runs nothing there.

// maxIndex bounds the index read: a repository of a million files has one
// of some 100 MiB.
const maxIndex = 256 << 20

// maxGitlinks bounds the submodules checked, and maxLinkPath their paths
// (PATH_MAX: git's lstat cannot reach a longer one, so it runs nothing
// there). A version 4 index shares each path's prefix with the one before:
// without these, an index of a few MiB made of paths that each extend the
// previous one had the parser copy gigabytes.
const (
	maxGitlinks = 10000
	maxLinkPath = 4096
)

// errTooManyGitlinks: the index has more gitlinks than are checked.
var errTooManyGitlinks = fmt.Errorf("it has over %d submodules: only the first %d were checked", maxGitlinks, maxGitlinks)

// gitlinks lists the paths of the submodule entries (mode 160000) of the
// index of the repository at ws (.git a directory).
func gitlinks(ws string) ([]string, error) {
	b, err := regfile.Read(filepath.Join(ws, ".git", "index"), true, maxIndex)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	hash := 20
	if strings.EqualFold(gitConfigValue(filepath.Join(ws, ".git", "config"), "extensions", "objectformat"), "sha256") {
		hash = 32
	}
	links, replacing, ext, err := indexLinks(b, hash)
	if err != nil {
		return links, err
	}
	more, err := sharedLinks(ws, b[ext:], hash, replacing, maxGitlinks-len(links))
	return append(links, more...), err
}

// parseIndex reads git's index format, versions 2 to 4, as far as the paths
// of its gitlinks (a split index's shared part aside: split.go). Over
// maxGitlinks, the first ones are returned with errTooManyGitlinks.
func parseIndex(b []byte, hash int) ([]string, error) {
	links, _, _, err := indexLinks(b, hash)
	return links, err
}

// indexLinks is parseIndex, and also the positions of the gitlinks with
// no path (in a split index, those that replace an entry of the shared
// part, whose path they take) and where the extensions begin.
func indexLinks(b []byte, hash int) (links []string, replacing []int, ext int, err error) {
	ext, err = walkIndex(b, hash, func(i int, path []byte, link bool) error {
		switch {
		case !link || len(path) > maxLinkPath:
		case len(links)+len(replacing) == maxGitlinks:
			return errTooManyGitlinks
		case len(path) == 0:
			replacing = append(replacing, i)
		default:
			links = append(links, string(path))
		}
		return nil
	})
	if err != nil && !errors.Is(err, errTooManyGitlinks) {
		return nil, nil, 0, err
	}
	return links, replacing, ext, err
}

func badIndex(what string) error { return fmt.Errorf("the git index is damaged (%s)", what) }

// walkIndex calls fn with each entry of the index b: its position, path
// (valid only during the call) and whether it is a gitlink; it returns
// where the extensions begin.
func walkIndex(b []byte, hash int, fn func(i int, path []byte, link bool) error) (int, error) {
	bad := badIndex
	if len(b) < 12 || string(b[:4]) != "DIRC" {
		return 0, bad("no DIRC header")
	}
	version := binary.BigEndian.Uint32(b[4:8])
	if version < 2 || version > 4 {
		return 0, bad(fmt.Sprintf("version %d", version))
	}
	n := binary.BigEndian.Uint32(b[8:12])
	var prev []byte // version 4: the previous path, which the next one shares a prefix with
	off := 12
	for i := uint32(0); i < n; i++ {
		start := off
		fixed := 40 + hash + 2
		if off+fixed > len(b) {
			return 0, bad("cut short")
		}
		link := binary.BigEndian.Uint32(b[off+24:off+28])&0o170000 == 0o160000
		flags := binary.BigEndian.Uint16(b[off+40+hash : off+fixed])
		off += fixed
		if version >= 3 && flags&0x4000 != 0 {
			off += 2
			fixed += 2
		}
		if off > len(b) {
			return 0, bad("cut short")
		}
		if version == 4 {
			strip, used := indexVarint(b[off:])
			if used == 0 || strip > uint64(len(prev)) {
				return 0, bad("a path's prefix")
			}
			off += used
			end := bytes.IndexByte(b[min(off, len(b)):], 0)
			if end < 0 {
				return 0, bad("a path")
			}
			prev = append(prev[:len(prev)-int(strip)], b[off:off+end]...)
			off += end + 1
			if err := fn(int(i), prev, link); err != nil {
				return 0, err
			}
			continue
		}
		end := bytes.IndexByte(b[off:], 0)
		if end < 0 {
			return 0, bad("a path")
		}
		if err := fn(int(i), b[off:off+end], link); err != nil {
			return 0, err
		}
		off = start + (fixed+end+8)&^7
	}
	if off > len(b) {
		return 0, bad("cut short")
	}
	return off, nil
}

// indexVarint is git's offset varint (varint.c); used is 0 when bad.
func indexVarint(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	val := uint64(c & 127)
	i := 1
	for c&128 != 0 {
		if i >= len(b) || i > 9 {
			return 0, 0
		}
		val++
		c = b[i]
		i++
		val = val<<7 + uint64(c&127)
	}
	return val, i
}

// MoveAsideRepos moves aside what the session changed (since its start)
// of the repositories in ws: the .git link of each submodule whose link,
// config or hooks changed, what changed of those in the git directories
// under .git/modules (gitdirs.go), and of every repository the session
// planted or changed anywhere in ws (gitrepos.go), renamed beside it as
// MoveAsideCreated does. A git directory outside ws is not the session's
// to change, and is not looked at.
func MoveAsideRepos(ws, name string, since time.Time) []MovedAside {
	// File times come from the kernel's coarse clock, a tick behind the
	// one since was read from: a second of margin.
	since = since.Add(-time.Second)
	var moved []MovedAside
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(ws, ".git"), &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		moved = moveAsideSubmodules(ws, name, since)
	}
	moved = append(moved, moveAsideRepos(ws, name, since)...)
	if len(moved) > maxListed {
		// Every one is moved; the record (read back at most 16 MiB) and
		// the output list the first ones.
		n := len(moved) - maxListed
		moved = append(moved[:maxListed], MovedAside{Path: ".git/index", Error: fmt.Sprintf("named %d more repositories or submodules the session changed, not listed here (their links and git directories' entries were moved aside or could not be, as above)", n)})
	}
	return moved
}

// moveAsideSubmodules is MoveAsideRepos's part for the submodules of the
// repository at ws (.git a directory).
func moveAsideSubmodules(ws, name string, since time.Time) []MovedAside {
	links, err := gitlinks(ws)
	var moved []MovedAside
	if err != nil {
		// Too many: the first ones are still checked, and the user told.
		moved = append(moved, MovedAside{Path: ".git/index", Error: "cannot check its submodules: " + err.Error()})
	}
	for _, sub := range links {
		if filepath.IsAbs(sub) || strings.Contains("/"+sub+"/", "/../") || strings.Contains("/"+sub+"/", "/./") {
			continue
		}
		rel := filepath.Join(sub, ".git")
		if !changedSince(ws, rel, since) {
			continue
		}
		moved = append(moved, MoveAsideCreated(ws, name, []string{rel})...)
	}
	return append(moved, moveAsideGitDirs(ws, name, ".git/modules", since)...)
}

// maxListed bounds the submodules listed as moved aside.
const maxListed = 100

// changedSince reports whether the submodule link ws/rel, or the git
// directory it names inside ws, or that directory's config, changed (ctime)
// since; nothing is followed out of ws.
func changedSince(ws, rel string, since time.Time) bool {
	// A symlink on the way, which git would follow, counts as a change.
	newer := func(rel string) (bool, bool) { return changedEntry(ws, rel, since) }
	changed, exists := newer(rel)
	if !exists || changed {
		return exists
	}
	gitdir := rel
	if b, err := regfile.Read(filepath.Join(ws, rel), true, 4096); err == nil {
		t, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
		if !ok {
			return false
		}
		t = strings.TrimSpace(t)
		if !filepath.IsAbs(t) {
			t = filepath.Join(ws, filepath.Dir(rel), t)
		}
		t = filepath.Clean(t)
		if t == ws || !Within(t, ws) {
			return false
		}
		gitdir = strings.TrimPrefix(t, ws+"/")
	}
	// Not the git directory itself, which git in the session changes at
	// every `git status` (its index): only what says what git runs.
	// Nor its hooks, git runs at a commit in the submodule.
	return len(changedGitDir(ws, gitdir, since)) > 0
}
