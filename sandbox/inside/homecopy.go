package inside

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"mosaic/sandbox"
)

// The copy of a session's home between its tmpfs and its home on disk
// (HomeStore), both ways. One side is always the session's to choose: the
// tmpfs it wrote (saved once every process of it is gone), or what an
// earlier session left on disk (loaded). So the copy:
//
//   - walks by descriptor, each step one openat2 beneath its directory
//     that follows no symlink and no magic link and crosses no mount
//     (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|
//     RESOLVE_NO_XDEV): a symlink is copied as its text, never followed,
//     and the binds below the home (the workspace, a --rw path) are
//     neither read nor written;
//   - copies directories, regular files and symlinks only: a FIFO, a
//     socket or a device is skipped and counted (opening a FIFO no one
//     writes would hang the save);
//   - charges every file's size (its apparent size, in whole blocks: a
//     sparse file of 1 TB is 1 TB) to a budget, the home's bound, and what
//     the tmpfs keeps for free but a disk does not (a block for each
//     directory and each long symlink, each entry's name in its
//     directory) to a second one as large; it makes at most maxEntries
//     entries: what does not fit is skipped and counted, so nothing the
//     session made can write more than twice its bound to the user's disk;
//   - copies a file with several links once, and links the others to the
//     copy: a file linked a thousand times is not a thousand copies;
//   - creates every entry anew (O_EXCL) in a destination nobody else
//     writes, so it never writes through anything already there;
//   - for a save, links a file that is byte for byte the kept home's file
//     of the same path, mode and time (the previous home, prev) instead of
//     writing it again (homeunchanged.go): an unchanged home writes
//     nothing to the disk.

// maxEntries bounds the entries a copy makes: a million empty files take
// no room in a tmpfs's bound, but are not free on the user's disk.
const maxEntries = 1 << 20

// maxCopyDepth bounds the directories' nesting: each level holds two
// descriptors while the copy is below it.
const maxCopyDepth = 256

// maxLinkedFiles bounds the files with several links the copy remembers.
const maxLinkedFiles = 1 << 16

// diskBlock is what a directory, a long symlink, or a file's last part
// takes of a disk (ext4's block); a tmpfs keeps a directory and a symlink
// of fewer than 128 bytes in memory outside its bound.
const diskBlock = 4096

// fastSymlink is the longest symlink text ext4 keeps in its inode.
const fastSymlink = 59

// copyStats is a copy's count (sandbox.CopyStats, which the home's
// report carries) and what the copy learnt of the trees on the way.
type copyStats struct {
	sandbox.CopyStats
	// mounts are the entries of the source that were mount points (a
	// bind below the home: the workspace), relative to its root.
	mounts []string
	// hidden are the entries of the source that met a mount point in the
	// destination (a load: the kept home's entries a bind hides from the
	// session), relative to its root.
	hidden []string
	// metaFull says an entry was left out for the second budget
	// (copyHome's meta).
	metaFull bool
}

// hide counts an entry of the source left out for a mount point in the
// destination at rel, and remembers where (copyStats.hidden).
func (c *treeCopy) hide(rel string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Skip("mount-point")
	c.stats.hidden = append(c.stats.hidden, rel)
}

// skip counts an entry left out, and why.
func (c *treeCopy) skip(why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Skip(why)
}

// treeCopy is one copy of a home, from the directory src to dst.
type treeCopy struct {
	budget  int64 // for the files' bytes
	meta    int64 // for directories, long symlinks and names (metaCost)
	entries int
	srcDev  uint64
	dstRoot int
	linked  map[[2]uint64]string // (dev, ino) of a file with several links -> its copy, below dstRoot
	// prev is the previous home's directory at the one being copied, for
	// a save (-1: none, or not a directory there).
	prev    int
	stats   copyStats
	mu      sync.Mutex  // stats, which the pool's workers change too
	crossFS atomic.Bool // copy_file_range refused a file of this copy: sendFile for the rest
	// pool copies the files on goroutines of its own while the walk goes
	// on (homepool.go); nil copies them in the walk. dirJobs are the
	// copies of the directory the walk is in.
	pool    *copyPool
	dirJobs *sync.WaitGroup
	// same are the files a comparison found equal to the previous home's
	// (sameHome): linked without their bytes read again.
	same sameFiles
	pacer
}

// copyHome copies the tree below the directory src into the empty
// directory dst, within budget bytes of files and meta bytes of the rest,
// calling progress (when not nil) at most once a second as it goes. prev,
// when not -1, is the previous home on the same disk as dst: a file equal
// to its file of the same path is linked from there, not written. An
// error is one the copy cannot go on from (the destination full, a read
// that failed); what it skips is in the stats.
func copyHome(src, dst, prev int, budget, meta int64, progress func()) (copyStats, error) {
	return copyHomeKnowing(src, dst, prev, budget, meta, progress, nil)
}

// copyHomeKnowing is copyHome that links the files same holds without
// comparing their bytes again.
func copyHomeKnowing(src, dst, prev int, budget, meta int64, progress func(), same sameFiles) (copyStats, error) {
	var st unix.Stat_t
	if err := unix.Fstat(src, &st); err != nil {
		return copyStats{}, err
	}
	c := &treeCopy{budget: budget, meta: meta, srcDev: st.Dev, dstRoot: dst, linked: map[[2]uint64]string{}, prev: prev, same: same, pacer: newPacer(progress)}
	if weakened {
		err := c.naiveDir(src, dst)
		return c.stats, err
	}
	c.pool, c.dirJobs = newCopyPool(), new(sync.WaitGroup)
	err := c.dir(src, dst, "", 0)
	c.dirJobs.Wait()
	if perr := c.pool.wait(); err == nil {
		err = perr
	}
	return c.stats, err
}

// beneath is the resolution every step of the copy takes.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

func openIn(dir int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat2(dir, name, &unix.OpenHow{Flags: uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: beneath})
		if err != unix.EINTR && err != unix.EAGAIN {
			return fd, err
		}
	}
}

// readNames lists a directory's entries ("." and ".." left out).
func readNames(fd int) ([]string, error) {
	var names []string
	err := eachEntry(fd, func(name string, _ byte) { names = append(names, name) })
	return names, err
}

// eachEntry calls f with the name and type (DT_*, DT_UNKNOWN when the
// file system gives none) of each entry of the directory fd, "." and ".."
// left out, from its start however often it was read.
func eachEntry(fd int, f func(name string, typ byte)) error {
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return err
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		for b := buf[:n]; len(b) >= 19; { // linux_dirent64: ino, off, reclen, type, name
			reclen := int(binary.NativeEndian.Uint16(b[16:]))
			if reclen < 19 || reclen > len(b) {
				return unix.EINVAL
			}
			ino := binary.NativeEndian.Uint64(b[0:]) // 0: no file there (ParseDirent's rule)
			if name := string(trimNUL(b[19:reclen])); ino != 0 && name != "." && name != ".." {
				f(name, b[18])
			}
			b = b[reclen:]
		}
	}
}

// dir copies the entries of src (at rel below the source root) into dst.
func (c *treeCopy) dir(src, dst int, rel string, depth int) error {
	names, err := readNames(src)
	if err != nil {
		return fmt.Errorf("cannot list %s: %w", orDot(rel), err)
	}
	for _, name := range names {
		if err := c.entry(src, dst, name, joinRel(rel, name), depth); err != nil {
			return err
		}
	}
	return nil
}

// entry copies one entry, name in src, into dst.
func (c *treeCopy) entry(src, dst int, name, rel string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(src, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("cannot stat %s: %w", rel, err)
	}
	if st.Dev != c.srcDev {
		c.skip("mount-point") // a bind below the home: not the home's
		c.stats.mounts = append(c.stats.mounts, rel)
		return nil
	}
	c.tick()
	if c.entries++; c.entries > maxEntries {
		c.skip("too-many")
		return nil
	}
	if !c.take(&c.meta, metaCost(name, st)) {
		c.skip("too-large")
		c.stats.metaFull = true
		return nil
	}
	readable(src, name, st)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return c.subdir(src, dst, name, rel, st, depth)
	case unix.S_IFREG:
		return c.file(src, dst, name, rel, st)
	case unix.S_IFLNK:
		return c.symlink(src, dst, name, rel)
	case unix.S_IFIFO:
		c.skip("fifo")
	case unix.S_IFSOCK:
		c.skip("socket")
	default:
		c.skip("device")
	}
	return nil
}

// readable gives the owner (the copy runs as the owner, with no
// capability) read access to a file, and search access to a directory,
// that a chmod 000 took away: the copy restores each entry's mode. No
// symlink is followed: name was just seen to be a directory or a file, and
// nothing else of the session runs.
func readable(dir int, name string, st unix.Stat_t) {
	want := uint32(0o400)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		want = 0o700
	case unix.S_IFREG:
	default:
		return
	}
	if st.Mode&want != want {
		_ = unix.Fchmodat(dir, name, st.Mode&0o7777|want, 0)
	}
}

// subdir copies the directory name of src into dst, and below it.
func (c *treeCopy) subdir(src, dst int, name, rel string, st unix.Stat_t, depth int) error {
	if depth >= maxCopyDepth {
		c.skip("too-deep")
		return nil
	}
	if err := unix.Mkdirat(dst, name, 0o700); err != nil && err != unix.EEXIST {
		return fmt.Errorf("cannot make %s: %w", rel, err)
	}
	to, err := openIn(dst, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err == unix.EXDEV { // a mount point bwrap made in the tmpfs (a bind below the home)
		c.hide(rel)
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot open %s: %w", rel, err)
	}
	defer unix.Close(to)
	from, err := openIn(src, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("cannot open %s: %w", rel, err)
	}
	defer unix.Close(from)
	defer c.descend(name)()
	outer := c.dirJobs
	c.dirJobs = new(sync.WaitGroup)
	err = c.dir(from, to, rel, depth+1)
	c.dirJobs.Wait() // its files' copies are done with to and the previous home's directory
	c.dirJobs = outer
	if err == nil {
		err = c.pool.failed()
	}
	if err != nil {
		return err
	}
	_ = unix.Fchmod(to, st.Mode&0o777) // as it was: the next load gives itself its way in (readable)
	return futimens(to, st.Atim, st.Mtim)
}

// file copies the regular file name of src into dst: on the pool's
// goroutines (at most a few files are open at once), but a file with
// several links, which the walk copies once and links to that copy.
func (c *treeCopy) file(src, dst int, name, rel string, st unix.Stat_t) error {
	key := [2]uint64{st.Dev, st.Ino}
	if first, ok := c.linked[key]; ok && st.Nlink > 1 {
		if unix.Linkat(c.dstRoot, first, dst, name, 0) == nil {
			c.count(0, false)
			return nil
		}
	}
	if !c.take(&c.budget, roundBlock(st.Size)) {
		c.skip("too-large")
		return nil
	}
	from, err := openIn(src, name, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("cannot open %s: %w", rel, err)
	}
	if c.pool != nil && st.Nlink == 1 {
		return c.pool.run(c.dirJobs, from, dst, c.prev, func(from, dst, prev int) error {
			return c.fileBytes(from, dst, prev, name, rel, st)
		})
	}
	defer unix.Close(from)
	if err := c.fileBytes(from, dst, c.prev, name, rel, st); err != nil {
		return err
	}
	if st.Nlink > 1 && len(c.linked) < maxLinkedFiles {
		c.linked[key] = rel
	}
	return nil
}

// fileBytes makes name in dst from the open file from (whose stat is st):
// linked from the previous home's directory prev when unchanged there,
// else written.
func (c *treeCopy) fileBytes(from, dst, prev int, name, rel string, st unix.Stat_t) error {
	if c.unchanged(from, dst, prev, name, st) {
		return nil
	}
	to, err := openIn(dst, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, uint32(st.Mode&0o777|0o600))
	if err == unix.EEXIST || err == unix.EXDEV { // a mount point bwrap made (a binary bound below the home)
		c.hide(rel)
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot create %s: %w", rel, err)
	}
	defer unix.Close(to)
	n, err := c.copyBytes(to, from, st.Size)
	if err != nil {
		return fmt.Errorf("cannot copy %s: %w", rel, err)
	}
	c.count(n, false)
	_ = unix.Fchmod(to, st.Mode&0o777)
	return futimens(to, st.Atim, st.Mtim)
}

// count counts a file made, of n bytes, linked from the previous home
// when unchanged.
func (c *treeCopy) count(n int64, unchanged bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Files++
	c.stats.Bytes += n
	if unchanged {
		c.stats.Unchanged++
	}
}

// pacer calls progress (when set) at most once a second while a copy or
// a comparison goes on (the save asks systemd for more time).
type pacer struct {
	progress func()
	mu       sync.Mutex
	ticked   time.Time // the last call
}

func newPacer(progress func()) pacer {
	return pacer{progress: progress, ticked: time.Now()}
}

// tick calls progress when a second has passed since it last did.
func (p *pacer) tick() {
	if p.progress == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); now.Sub(p.ticked) >= time.Second {
		p.ticked = now
		p.progress()
	}
}

// take charges n bytes to a budget of the copy's; false, and nothing
// charged, when they do not fit.
func (c *treeCopy) take(budget *int64, n int64) bool {
	if n > *budget {
		return false
	}
	*budget -= n
	return true
}

// metaCost is what an entry takes of a disk beyond its file's bytes, and
// a tmpfs keeps outside its bound: its name in its directory (ext4: 8
// bytes and the name, to 4), and a block for a directory and for a symlink
// too long for the inode. (A symlink's size is the length of its text.)
func metaCost(name string, st unix.Stat_t) int64 {
	n := int64(8+len(name)+3) &^ 3
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		n += diskBlock
	case unix.S_IFLNK:
		if st.Size > fastSymlink {
			n += diskBlock
		}
	}
	return n
}

// roundBlock is n bytes of a file in whole disk blocks.
func roundBlock(n int64) int64 {
	if n > 1<<62 {
		return 1 << 62 // more than any budget, and no overflow
	}
	return (n + diskBlock - 1) &^ (diskBlock - 1)
}

// copyBytes copies at most size bytes of from to to, in the kernel where
// it can (copy_file_range), and reports how many.
func (c *treeCopy) copyBytes(to, from int, size int64) (int64, error) {
	var done int64
	for done < size {
		c.tick()
		if c.crossFS.Load() {
			m, err := c.sendFile(to, from, size-done)
			return done + m, err
		}
		n, err := unix.CopyFileRange(from, nil, to, nil, int(min(size-done, 64<<20)), 0)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EXDEV || err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP {
			c.crossFS.Store(true) // so for every file: the tmpfs and a disk (load and save) never share one
			m, err := c.sendFile(to, from, size-done)
			return done + m, err
		}
		if err != nil {
			return done, err
		}
		if n == 0 {
			break // shorter than it was: all there is
		}
		done += int64(n)
	}
	return done, nil
}

// sendFile is copyBytes between two file systems (the load: the disk to
// the tmpfs; the save: the other way), where copy_file_range refuses: the
// kernel copies from one's page cache to the other's pages, one copy where
// read and write make two. Where sendfile cannot, copyRead does.
func (c *treeCopy) sendFile(to, from int, size int64) (int64, error) {
	var done int64
	for done < size {
		c.tick()
		n, err := unix.Sendfile(to, from, nil, int(min(size-done, 64<<20)))
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if done == 0 && (err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP) {
			return c.copyRead(to, from, size)
		}
		if err != nil {
			return done, err
		}
		if n == 0 {
			break
		}
		done += int64(n)
	}
	return done, nil
}

// copyRead is copyBytes by read and write.
func (c *treeCopy) copyRead(to, from int, size int64) (int64, error) {
	b := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(b)
	buf := *b
	var done int64
	for done < size {
		c.tick()
		n, err := unix.Read(from, buf[:min(int64(len(buf)), size-done)])
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return done, err
		}
		for w := 0; w < n; {
			m, err := unix.Write(to, buf[w:n])
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return done, err
			}
			w += m
		}
		done += int64(n)
	}
	return done, nil
}

// symlink copies the symlink name of src into dst, as its text.
func (c *treeCopy) symlink(src, dst int, name, rel string) error {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(src, name, buf)
	if err != nil {
		return fmt.Errorf("cannot read the link %s: %w", rel, err)
	}
	if err := unix.Symlinkat(string(buf[:n]), dst, name); err != nil {
		if err == unix.EEXIST {
			c.hide(rel)
			return nil
		}
		return fmt.Errorf("cannot make the link %s: %w", rel, err)
	}
	c.count(0, false) // under the lock: the pool's goroutines count meanwhile
	return nil
}

// removeTree removes name in the directory dir and everything below it,
// following no symlink and crossing no mount.
func removeTree(dir int, name string) error {
	return removeBelow(dir, name, 0)
}

func removeBelow(dir int, name string, depth int) error {
	err := unix.Unlinkat(dir, name, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR && err != unix.EPERM {
		return err
	}
	if depth > 2*maxCopyDepth {
		return fmt.Errorf("%s is nested too deep to remove", name)
	}
	// A directory the session locked (chmod 000, saved with its mode)
	// cannot be opened to be emptied: it is opened up first. No symlink is
	// followed: name was just seen to be a directory, and nothing else of
	// the session runs (as in readable).
	var st unix.Stat_t
	if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Mode&0o700 != 0o700 {
		_ = unix.Fchmodat(dir, name, 0o700, 0)
	}
	fd, err := openIn(dir, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	_ = unix.Fchmod(fd, 0o700)
	names, err := readNames(fd)
	for _, n := range names {
		if e := removeBelow(fd, n, depth+1); e != nil && err == nil {
			err = e
		}
	}
	unix.Close(fd)
	if e := unix.Unlinkat(dir, name, unix.AT_REMOVEDIR); e != nil && !errors.Is(e, unix.ENOENT) && err == nil {
		err = e
	}
	return err
}

// futimens sets the times of the file fd is open on (utimensat with a
// NULL path, which x/sys/unix's UtimesNanoAt cannot pass).
func futimens(fd int, atime, mtime unix.Timespec) error {
	ts := [2]unix.Timespec{atime, mtime}
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

func joinRel(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

func orDot(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}
