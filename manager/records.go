package manager

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/internal/errcode"
	"mosaic/manager/clone"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/manager/session"
	"mosaic/manager/statedir"
	"mosaic/sandbox/egress"
	"mosaic/units"
)

// ListAll is List plus the ended sessions whose units systemd has collected.
func (m *Manager) ListAll(ctx context.Context) ([]Session, error) {
	p, err := m.Paths()
	if err != nil {
		return nil, err
	}
	live, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, s := range live {
		seen[s.Name] = true
	}
	for _, name := range records.Names(p.StateRoot) {
		if seen[name] || units.ValidateName(name) != nil {
			continue
		}
		if s, ok := session.FromRecords(name, p.SessionDir(name)); ok {
			live = append(live, s)
		}
	}
	sort.Slice(live, func(i, j int) bool { return live[i].Name < live[j].Name })
	return live, nil
}

// Remove forgets an ended session: its failed unit, if systemd still has
// one, and its state directory (home, /tmp, records). A running session is
// a refusal, and so is one another mosaic command is starting or removing,
// and, without force, a clone-mode session whose change was neither
// applied nor discarded (unapplied-changes).
func (m *Manager) Remove(ctx context.Context, name string, force bool) error {
	p, s, lock, err := m.lockedSession(ctx, name, "remove")
	if err != nil {
		return err
	}
	defer lock.Release()
	if s.Running() {
		return errcode.SessionRunning.New("session %s is %s: stop it first with `mosaic stop %s`", name, s.State, name)
	}
	if !force {
		_ = m.KnowChange(ctx, &s) // one that left nothing goes without --force
	}
	if s.Clone != nil && s.Clone.Pending() && !force {
		return errcode.UnappliedChanges.New("session %s's change (%s) was neither applied nor discarded: `mosaic diff %s`, then `mosaic apply %s` or `mosaic discard %s` (or `mosaic rm --force %s`)", name, s.Clone.Line(), name, name, name, name)
	}
	m.forget(ctx, s.Unit)
	os.RemoveAll(p.EgressDir(name)) // its proxy's socket directory
	os.RemoveAll(egress.ControlDir(p.EgressDir(name)))
	os.RemoveAll(units.PublishDir(p.RuntimeDir, name)) // its publish forwarder's
	removeStaleSocket(units.AttachSocket(p.RuntimeDir, name))
	removeFinishState(p, name)
	// The leftovers first: they would otherwise take this removal's
	// directory, set aside for the background, before its unit does.
	leftovers := statedir.RemoveLeftovers(p.StateRoot)
	if err := m.removeState(ctx, p.SessionDir(name)); err != nil {
		return errcode.StateDir.New("cannot remove the state of session %s: %w", name, statedir.Hint(err, p.SessionDir(name)))
	}
	if leftovers != nil {
		return errcode.StateDir.New("session %s is removed, but an earlier removal's leftovers are not: %w", name, leftovers)
	}
	return nil
}

// GC removes every ended session, as Remove does, and returns their names.
// With keepHomes, an ended session whose home holds anything (an agent's
// sign-in or settings, kept for the next session of that name) is kept
// and named in kept instead; a clone-mode session whose change was neither
// applied nor discarded is always kept, and named in unapplied. It stops
// the tie scopes of runs that are gone (stopDeadTies). One session that cannot be removed does not
// stop the others: the error names each that failed.
func (m *Manager) GC(ctx context.Context, keepHomes bool) (removed, kept, unapplied []string, err error) {
	p, err := m.Paths()
	if err != nil {
		return nil, nil, nil, err
	}
	all, err := m.ListAll(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	var failed []string
	for _, s := range all {
		if s.Running() {
			continue
		}
		if keepHomes && s.Problem == "" && hasEntries(filepath.Join(p.SessionDir(s.Name), "home")) {
			kept = append(kept, s.Name)
			continue
		}
		_ = m.KnowChange(ctx, &s) // a change never read: what it left decides
		if s.Clone != nil && s.Clone.Pending() {
			unapplied = append(unapplied, s.Name) // its change waits for apply or discard
			continue
		}
		if err := m.Remove(ctx, s.Name, false); err != nil {
			if errcode.Of(err).Code != errcode.SessionExists.Name {
				failed = append(failed, err.Error()) // a name another command holds is not ended yet
			}
			continue
		}
		removed = append(removed, s.Name)
	}
	if err := statedir.RemoveLeftovers(p.StateRoot); err != nil {
		failed = append(failed, err.Error())
	}
	if err := statedir.RemoveOrphanCaches(p.StateRoot); err != nil {
		failed = append(failed, err.Error())
	}
	clone.RemoveSpares(p.StateRoot, spareMaxAge)
	removeStaleAttachSockets(p, all)
	m.stopDeadTies(ctx)
	if len(failed) > 0 {
		return removed, kept, unapplied, errcode.StateDir.New("gc removed %d sessions but not everything: %s", len(removed), strings.Join(failed, "; "))
	}
	return removed, kept, unapplied, nil
}

// hasEntries reports whether dir holds anything but empty directories (a
// home where only bind mount points were ever made holds nothing of worth)
// and the ~/.gitconfig mosaic itself wrote there (mosaicGitConfig): a home
// is judged by what the user or the agent put in it.
func hasEntries(dir string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || found {
			return filepath.SkipAll
		}
		if path == filepath.Join(dir, ".gitconfig") && mosaicGitConfig(path, d) {
			return nil
		}
		if !d.IsDir() {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// mosaicGitConfig reports whether path, a home's ~/.gitconfig, is the one
// mosaic writes at each start (it begins with request.GitConfigHeader and
// is a regular file): written again at the next start, edits to it last
// only until then, so it keeps nothing of the user's.
func mosaicGitConfig(path string, d fs.DirEntry) bool {
	if !d.Type().IsRegular() {
		return false
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(request.GitConfigHeader))
	n, _ := io.ReadFull(f, head)
	return string(head[:n]) == request.GitConfigHeader
}

// removeStaleAttachSockets removes the attach sockets of the sessions not
// running (all is every session mosaic knows) that nobody listens on: a
// terminal holder killed (by kill -9, or an rm --force of its session)
// leaves its socket behind.
func removeStaleAttachSockets(p request.Paths, all []Session) {
	running := map[string]bool{}
	for _, s := range all {
		running[s.Name] = s.Running()
	}
	entries, _ := os.ReadDir(units.AttachDir(p.RuntimeDir))
	for _, e := range entries {
		if !running[e.Name()] {
			removeStaleSocket(units.AttachSocket(p.RuntimeDir, e.Name()))
		}
	}
}

// removeStaleSocket removes the unix socket at path when nothing listens
// on it (connecting is refused: its holder is gone); a live one, and
// anything not a socket, is left.
func removeStaleSocket(path string) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Type() != fs.ModeSocket {
		return
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		os.Remove(path)
	}
}
