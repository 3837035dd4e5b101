package sandbox

import (
	"os"
	"path/filepath"
	"strings"
)

// A session's kept home is mounted at the user's own home path, so an
// absolute symlink a session leaves there (.claude -> /home/u/.claude)
// means its own file inside, but the user's real one on the host: a user
// who writes an agent's configuration into the kept home from the host (as
// `mosaic home` suggests) writes through it into the real home.

// HomeLinks lists the symlinks in the top levels of a kept home (hostHome,
// mounted at home inside) that lead, on the host, out of it: an absolute
// target under home, or a relative one that climbs out. Each is
// "PATH -> TARGET". Only the first maxDepth levels are looked at: where an
// agent's configuration goes.
func HomeLinks(hostHome, home string, maxDepth int) []string {
	var out []string
	var walk func(dir, rel string, depth int)
	walk = func(dir, rel string, depth int) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			p, r := filepath.Join(dir, e.Name()), filepath.Join(rel, e.Name())
			switch {
			case e.Type()&os.ModeSymlink != 0:
				t, err := os.Readlink(p)
				if err != nil {
					continue
				}
				if filepath.IsAbs(t) && Within(filepath.Clean(t), home) ||
					!filepath.IsAbs(t) && strings.HasPrefix(filepath.Join(filepath.Dir(r), t)+"/", "../") {
					out = append(out, p+" -> "+t)
				}
			case e.IsDir() && depth < maxDepth:
				walk(p, r, depth+1)
			}
		}
	}
	walk(hostHome, "", 1)
	return out
}
