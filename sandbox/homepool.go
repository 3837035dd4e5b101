package sandbox

import (
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A home's load and save spend their time on the bytes of its large
// files (a 150 MB home: 150 files of 1 MB, and 2,000 small ones, half of
// the time on each), which one goroutine copies at memory speed on one
// CPU. So the copy hands each large file's bytes to a pool of a few
// goroutines (at most four, at most the CPUs) and goes on with its walk:
// the directories, names, links and small files stay in the walk, in
// order, with the budgets; a directory's mode and times are set once the
// pool is done (setDirModes).

// poolAtLeast is the size from which a file's bytes go to the pool.
const poolAtLeast = 256 << 10

// copyBufs and cmpBufs are the buffers of copyRead and sameBytes, one
// for each goroutine that copies or compares at once.
var (
	copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}
	cmpBufs  = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}
)

// copyPool runs the large files' copies; nil where there is one CPU.
type copyPool struct {
	jobs chan func()
	wg   sync.WaitGroup
	mu   sync.Mutex
	err  error // the first of its copies' errors
}

// newCopyPool starts the pool's goroutines; nil with one CPU.
func newCopyPool() *copyPool {
	n := min(runtime.NumCPU(), 4)
	if n < 2 {
		return nil
	}
	p := &copyPool{jobs: make(chan func())}
	for range n {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for job := range p.jobs {
				job()
			}
		}()
	}
	return p
}

// run hands f the file from (which it then owns) and its own descriptors
// of the directories dst and prev (-1 for none), once one of the pool's
// goroutines is free; it returns the first error a copy had so far, on
// which the walk stops.
func (p *copyPool) run(from, dst, prev int, f func(from, dst, prev int) error) error {
	d, err := unix.Dup(dst)
	if err != nil {
		unix.Close(from)
		return err
	}
	q := -1
	if prev >= 0 {
		if q, err = unix.Dup(prev); err != nil {
			unix.Close(from)
			unix.Close(d)
			return err
		}
	}
	p.jobs <- func() {
		defer unix.Close(from)
		defer unix.Close(d)
		if q >= 0 {
			defer unix.Close(q)
		}
		if p.failed() != nil {
			return
		}
		if err := f(from, d, q); err != nil {
			p.mu.Lock()
			if p.err == nil {
				p.err = err
			}
			p.mu.Unlock()
		}
	}
	return p.failed()
}

// failed is the first error of the pool's copies, nil so far.
func (p *copyPool) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// wait lets the pool's goroutines finish what they have and returns the
// first error; a nil pool has none.
func (p *copyPool) wait() error {
	if p == nil {
		return nil
	}
	close(p.jobs)
	p.wg.Wait()
	return p.err
}

// dirMode is a directory of the copy, below its root, and the stat of its
// source, whose mode and times it gets once the pool is done.
type dirMode struct {
	rel string
	st  unix.Stat_t
}

// setDirModes gives each directory of the copy its source's mode and
// times, in the order the walk finished them: each after those below it
// (a parent's mode may keep its children out).
func (c *treeCopy) setDirModes() {
	for _, d := range c.dirModes {
		fd, err := openDirIn(c.dstRoot, d.rel)
		if err != nil {
			continue
		}
		_ = unix.Fchmod(fd, d.st.Mode&0o777)
		_ = futimens(fd, d.st.Atim, d.st.Mtim)
		unix.Close(fd)
	}
}

// openDirIn opens the directory rel below dir: at once, or, past PATH_MAX
// (a home's directories may nest 256 names of 255 bytes), a name at a
// time.
func openDirIn(dir int, rel string) (int, error) {
	fd, err := openIn(dir, rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != unix.ENAMETOOLONG {
		return fd, err
	}
	if fd, err = unix.Dup(dir); err != nil {
		return -1, err
	}
	for _, name := range strings.Split(rel, "/") {
		next, err := openIn(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}
