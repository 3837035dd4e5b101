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

// HomeLinksBudget is how many entries HomeLinks looks at, at most: a
// session can fill its home with entries to make mosaic home crawl.
const HomeLinksBudget = 100000

// homeLinksBudget is HomeLinksBudget, smaller in a test.
var homeLinksBudget = HomeLinksBudget

// HomeLinks lists the symlinks in the top levels of a kept home (hostHome,
// mounted at home inside) that lead, on the host, out of it: an absolute
// target under home, or a relative one that climbs out. Each is
// "PATH -> TARGET". Only the first maxDepth levels are looked at: where an
// agent's configuration goes; and only HomeLinksBudget entries: complete
// says whether every entry there was looked at.
func HomeLinks(hostHome, home string, maxDepth int) (links []string, complete bool) {
	left := homeLinksBudget
	var walk func(dir, rel string, depth int)
	walk = func(dir, rel string, depth int) {
		f, err := os.Open(dir)
		if err != nil {
			return
		}
		defer f.Close()
		for left > 0 {
			entries, err := f.ReadDir(min(left, 1024))
			left -= len(entries)
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
						links = append(links, p+" -> "+t)
					}
				case e.IsDir() && depth < maxDepth:
					walk(p, r, depth+1)
				}
			}
			if err != nil {
				return // io.EOF: the whole directory was read
			}
		}
		if left <= 0 {
			if more, _ := f.ReadDir(1); len(more) > 0 {
				complete = false
			}
		}
	}
	complete = true
	walk(hostHome, "", 1)
	return links, complete
}
