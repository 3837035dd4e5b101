package directfloor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"mosaic/sandbox"
)

// Files of the user's home that are links into the workspace. A dotfiles
// repository is linked into the home the usual way (GNU stow, chezmoi's
// symlink mode, a Makefile of ln -s): ~/.ssh/config ->
// ../dotfiles/ssh/config, ~/.config/nvim -> ../dotfiles/nvim. A direct
// session whose workspace is that repository wrote through them what the
// host runs: an ssh ProxyCommand, an ~/.aws/config credential_process, a
// ~/.config/systemd/user unit, ~/.config/environment.d, gpg-agent's and
// kube's configs (issue 38). So the links of the home's configuration
// places that lead into the workspace are found at the start, and what
// they lead to is bound read-only like the workspace's own host-run
// entries (pinned on the way: the session cannot move a directory aside
// and make another). A link whose target is missing, or that leads to the
// workspace itself or a directory holding it, cannot be covered by a bind:
// the workspace is refused, with the link named.
//
// The home can be big, so only the places tools read configuration from
// are looked at: the home's top, and below its dot directories (~/.config,
// ~/.local, ~/.ssh, ...) and ~/bin down to homeLinkDepth, never into a
// cache (~/.cache), a repository's .git or a node_modules, and at most
// homeLinkBudget entries in all; past it the start is refused, since a
// link not looked at might be one. Nothing but the links is stat'ed: the
// type of every other entry comes with its directory's listing.

// homeLinkDepth is how deep below the home a link is looked for: stow
// links a file at the first directory of its path that the home does not
// have, so ~/.config/systemd/user/x.service is at depth 4 when
// ~/.config/systemd/user exists; depth 5 leaves a level to spare.
const homeLinkDepth = 5

// homeLinkBudget bounds the entries looked at (a home's configuration
// places hold a few thousand; with the caches skipped, a big one 20,000).
var homeLinkBudget = 200000

// homeLinkSkip are directories never entered: caches and stores that hold
// no configuration a tool runs, and are large.
var homeLinkSkip = map[string]bool{".cache": true, ".git": true, "node_modules": true}

// homeLinkReason is the reason of a workspace file a home link leads to.
const homeLinkReason = "your home's %s is a link to it: the host's tools read it as that file (dotfiles linked into the home, as GNU stow does)"

// homeLinkEntries lists what the links of home's configuration places lead
// to inside ws (both real paths), as entries to bind read-only. err is the
// refusal: a link that leads to ws or a directory holding it, one whose
// target inside ws is missing, or a home too big to look through.
func homeLinkEntries(home, ws string) ([]Entry, error) {
	if home == "" || home == ws || sandbox.Within(home, ws) {
		return nil, nil // a home inside the workspace: its own entries are the workspace's
	}
	w := homeWalk{home: home, ws: ws, left: homeLinkBudget}
	if err := w.dir(".", 0); err != nil {
		return nil, err
	}
	return w.found, nil
}

// homeWalk is one look through a home for links into a workspace.
type homeWalk struct {
	home, ws string
	left     int // entries still to look at
	found    []Entry
}

// dir looks through the directory rel of the home, depth below it.
func (w *homeWalk) dir(rel string, depth int) error {
	entries, err := sandbox.ReadDirBeneath(w.home, rel, w.left)
	if err != nil {
		if strings.Contains(err.Error(), "entries") {
			return fmt.Errorf("your home's configuration directories hold over %d entries, so mosaic cannot tell whether a link there leads into the workspace, which a direct session would write for your host to run: use clone mode (drop --direct)", homeLinkBudget)
		}
		return nil // unreadable or gone: nothing the user's tools read either
	}
	w.left -= len(entries)
	for _, e := range entries {
		r := filepath.Join(rel, e.Name())
		switch {
		case e.Type()&os.ModeSymlink != 0:
			if depth == 0 && !strings.HasPrefix(e.Name(), ".") && e.Name() != "bin" {
				continue // ~/src -> /data/src: the home's top holds projects, not configuration
			}
			if err := w.link(r); err != nil {
				return err
			}
		case e.IsDir() && !homeLinkSkip[e.Name()] && depth+1 < homeLinkDepth:
			if depth == 0 && !strings.HasPrefix(e.Name(), ".") && e.Name() != "bin" {
				continue
			}
			if err := w.dir(r, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// link takes the home's link rel: what it leads to inside the workspace
// is an entry; a missing target inside it, or a target holding it, is the
// refusal.
func (w *homeWalk) link(rel string) error {
	p := filepath.Join(w.home, rel)
	shown := "~/" + rel
	t, err := filepath.EvalSymlinks(p)
	if err != nil {
		// Dangling: where it would land, were the session to make it.
		if t = danglingTarget(p); t != "" && (t == w.ws || sandbox.Within(t, w.ws)) {
			return fmt.Errorf("your home's %s is a link to %s, which does not exist: a direct session could make it, and your host would read it as %s; remove the link or make the file, or use clone mode (drop --direct)", shown, t, shown)
		}
		return nil
	}
	switch {
	case t == w.ws || sandbox.Within(w.ws, t) && t != "/" && !sandbox.Within(w.home, t):
		// Within(home, t): a link to the home or above (wine's
		// dosdevices/z: -> /) is no configuration of the workspace's.
		return fmt.Errorf("your home's %s is a link to %s, which holds the workspace: your host reads every file a direct session writes there as your configuration; use clone mode (drop --direct)", shown, t)
	case sandbox.Within(t, w.ws):
		w.found = append(w.found, Entry{Rel: strings.TrimPrefix(t, w.ws+"/"), Reason: fmt.Sprintf(homeLinkReason, shown)})
	}
	return nil
}

// danglingTarget is where the dangling link p would land: its text taken
// from its directory, with the directories on the way that exist resolved;
// "" when that cannot be told.
func danglingTarget(p string) string {
	t, err := os.Readlink(p)
	if err != nil {
		return ""
	}
	if !filepath.IsAbs(t) {
		t = filepath.Join(filepath.Dir(p), t)
	}
	var missing []string
	for dir := filepath.Clean(t); dir != "/"; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(append([]string{real}, missing...)...)
		}
		missing = append([]string{filepath.Base(dir)}, missing...)
	}
	return ""
}
