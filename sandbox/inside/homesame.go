package inside

import (
	"bytes"
	"errors"
	"sort"
	"sync"

	"golang.org/x/sys/unix"
)

// A session that changed nothing in its home needs no save at all: the
// kept home already is, entry for entry, what the session's home held. So
// before it writes a new home, the save compares the tmpfs with the kept
// home (sameHome), as the save itself would (the bytes of every file, its
// mode and modification time, each symlink's text, each directory's names,
// mode and modification time), and when they are the same it keeps the
// kept home as it is: no directory made, no link, no sync, no swap, and no
// old home to remove after. That was 2,150 links into two directories
// (linkat into one directory is serialised on its lock), a syncfs and the
// removal of as many links, against the reads of the comparison, which
// the save did anyway.
//
// Anything the save would not copy as it is (a file with several links, a
// FIFO, a socket, a device, what is over a bound) counts as a change: the
// save then runs as before, and what the comparison found equal so far is
// not read again (sameFiles). The first difference ends the comparison.
// Access times are not compared: the load's reads and the comparison's
// move them, and the save's links never kept them.

// errDiffers ends a comparison at its first difference.
var errDiffers = errors.New("the home changed")

// homeCompare is one comparison of the tmpfs with the kept home.
type homeCompare struct {
	srcDev  uint64
	budget  int64
	entries int
	pool    *copyPool
	mu      sync.Mutex // stats and same, which the pool's workers change too
	stats   copyStats
	same    sameFiles
	pacer
}

// sameFiles are the files a comparison found byte for byte equal: the
// tmpfs's inode -> the kept home's. Nothing writes either side between the
// comparison and the save (every process of the session is gone, and the
// kept home is the init's alone), so the save links them without reading
// them again.
type sameFiles map[uint64]uint64

// sameHome reports whether the tree below src (the tmpfs) is what the save
// would make of it and prev (the kept home) holds, with the stats a save
// would report; it also returns the files it found equal so far. budget
// is the save's bound on the files' bytes; tick, when not nil, is called
// as the comparison goes.
func sameHome(src, prev int, budget int64, tick func()) (copyStats, sameFiles, bool) {
	var st unix.Stat_t
	if unix.Fstat(src, &st) != nil {
		return copyStats{}, nil, false
	}
	h := &homeCompare{srcDev: st.Dev, budget: budget, pool: newCopyPool(), same: sameFiles{}, pacer: newPacer(tick)}
	var files sync.WaitGroup
	err := h.dir(src, prev, 0, &files)
	files.Wait()
	if perr := h.pool.wait(); err == nil {
		err = perr
	}
	return h.stats, h.same, err == nil
}

// dir compares the directory src of the tmpfs with prev of the kept home:
// the same names (but the tmpfs's mount points, which the save carries
// over from the kept home), each entry the same. files is the group of
// the directory's files' comparisons, which keep src and prev open.
func (h *homeCompare) dir(src, prev, depth int, files *sync.WaitGroup) error {
	names, err := readNames(src)
	if err != nil {
		return errDiffers
	}
	old, err := readNames(prev)
	if err != nil {
		return errDiffers
	}
	sort.Strings(names)
	sort.Strings(old)
	for i, j := 0, 0; i < len(names) || j < len(old); {
		if i == len(names) || (j < len(old) && old[j] < names[i]) {
			return errDiffers // gone from the tmpfs
		}
		var st unix.Stat_t
		if unix.Fstatat(src, names[i], &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			return errDiffers
		}
		inPrev := j < len(old) && old[j] == names[i]
		switch {
		case st.Dev != h.srcDev: // a bind below the home: the save carries the kept home's entry, if any
			h.count(-1, false)
		case !inPrev:
			if !h.onlyMountPoints(src, names[i], st, depth) {
				return errDiffers // new in the tmpfs
			}
		default:
			if err := h.entry(src, prev, names[i], st, depth, files); err != nil {
				return err
			}
		}
		i++
		if inPrev {
			j++
		}
		if err := h.pool.failed(); err != nil {
			return err
		}
	}
	return nil
}

// onlyMountPoints reports whether the entry name of the tmpfs's
// directory src (whose stat is st), which the kept home lacks, is a
// directory that holds mount points and directories of them only: what
// bwrap made for the binds below the home (~/.cache for ~/.cache/pip),
// which the save writes empty and RemoveMountPoints then removes from the
// kept home. It counts the mount points as the save does.
func (h *homeCompare) onlyMountPoints(src int, name string, st unix.Stat_t, depth int) bool {
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || depth >= maxCopyDepth {
		return false
	}
	dir, err := openIn(src, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return false
	}
	defer unix.Close(dir)
	names, err := readNames(dir)
	if err != nil || len(names) == 0 {
		return false // an empty directory the session made
	}
	for _, n := range names {
		var sub unix.Stat_t
		if unix.Fstatat(dir, n, &sub, unix.AT_SYMLINK_NOFOLLOW) != nil {
			return false
		}
		if sub.Dev != h.srcDev {
			h.count(-1, false)
		} else if !h.onlyMountPoints(dir, n, sub, depth+1) {
			return false
		}
	}
	return true
}

// entry compares the entry name of the tmpfs's directory src, whose stat
// is st, with the kept home's of the same name in prev.
func (h *homeCompare) entry(src, prev int, name string, st unix.Stat_t, depth int, files *sync.WaitGroup) error {
	h.tick()
	if h.entries++; h.entries > maxEntries {
		return errDiffers
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG { // fileBytes checks the kept home's file (one stat fewer of 2,000 small files)
		if st.Mode&0o400 == 0 {
			return errDiffers
		}
		return h.file(src, prev, name, st, files)
	}
	var ost unix.Stat_t
	if unix.Fstatat(prev, name, &ost, unix.AT_SYMLINK_NOFOLLOW) != nil || ost.Mode&unix.S_IFMT != st.Mode&unix.S_IFMT {
		return errDiffers
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if st.Mode&0o700 != 0o700 { // locked: the save opens it up (readable), and a comparison must change nothing
			return errDiffers
		}
		if depth >= maxCopyDepth || ost.Mode&0o7777 != st.Mode&0o777 || ost.Mtim != st.Mtim {
			return errDiffers
		}
		return h.subdir(src, prev, name, depth)
	case unix.S_IFLNK:
		if !sameLink(src, prev, name) {
			return errDiffers
		}
		h.count(0, false)
		return nil
	}
	return errDiffers // a FIFO, a socket, a device: the save leaves it out
}

// subdir compares the directories name of src and prev, and below them.
func (h *homeCompare) subdir(src, prev int, name string, depth int) error {
	from, err := openIn(src, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return errDiffers
	}
	defer unix.Close(from)
	old, err := openIn(prev, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return errDiffers
	}
	defer unix.Close(old)
	var files sync.WaitGroup
	defer files.Wait() // before the descriptors close
	return h.dir(from, old, depth+1, &files)
}

// file compares the regular file name of src, whose stat is st, with
// prev's: on the pool's goroutines, as the save copies.
func (h *homeCompare) file(src, prev int, name string, st unix.Stat_t, files *sync.WaitGroup) error {
	if st.Nlink != 1 || roundBlock(st.Size) > h.budget {
		return errDiffers // the save copies a linked file's links as they are; it leaves out what is over its bound
	}
	h.budget -= roundBlock(st.Size)
	from, err := openIn(src, name, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return errDiffers
	}
	if h.pool == nil {
		defer unix.Close(from)
		return h.fileBytes(from, prev, name, st)
	}
	return h.pool.run(files, from, -1, prev, func(from, _, prev int) error {
		return h.fileBytes(from, prev, name, st)
	})
}

// fileBytes compares the open file from (whose stat is st) with prev's
// file name: its type, size, mode, modification time, single link and
// bytes.
func (h *homeCompare) fileBytes(from, prev int, name string, st unix.Stat_t) error {
	old, ost, ok := prevFile(prev, name, st)
	if !ok {
		return errDiffers
	}
	defer unix.Close(old)
	if !sameBytes(from, old, st.Size, h.tick) {
		return errDiffers
	}
	h.mu.Lock()
	h.same[st.Ino] = ost.Ino
	h.mu.Unlock()
	h.count(st.Size, true)
	return nil
}

// count counts an entry as the save would: a file of n bytes (unchanged:
// one the save links), a symlink (0, false), or a mount point (-1).
func (h *homeCompare) count(n int64, unchanged bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n < 0 {
		h.stats.Skip("mount-point")
		return
	}
	h.stats.Files++
	h.stats.Bytes += n
	if unchanged {
		h.stats.Unchanged++
	}
}

// sameLink reports whether the symlinks name of a and b have the same
// text.
func sameLink(a, b int, name string) bool {
	x, y := make([]byte, unix.PathMax), make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(a, name, x)
	if err != nil {
		return false
	}
	m, err := unix.Readlinkat(b, name, y)
	return err == nil && bytes.Equal(x[:n], y[:m])
}
