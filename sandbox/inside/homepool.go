package inside

import (
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// A home's load and save spend their time on its files: the bytes of the
// large ones (copied, or compared with the previous home's), and the
// syscalls of the many small ones (a save of 2,000 unchanged small files
// took 60 ms on one CPU, of 150 files of 1 MB 28 ms). So the walk hands
// each file (but one with several links, which the walk links to its
// first copy) to a pool of a few goroutines, at most four, at most the
// CPUs, and goes on; the directories, names, links and budgets stay in the
// walk, in order. A directory waits for its files' copies before it is
// closed and given its mode and times (a file made in it afterwards would
// change its time, and a mode without write would keep the file out).

// copyBufs and cmpBufs are the buffers of copyRead and sameBytes, one
// for each goroutine that copies or compares at once.
var (
	copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}
	cmpBufs  = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}
)

// copyPool runs the files' copies; nil where there is one CPU.
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

// run hands f the file from (which it then owns) and the directories dst
// and prev (-1 for none), which stay open until dir, the group of their
// directory's copies, is waited for; once one of the pool's goroutines is
// free. It returns the first error a copy had so far, on which the walk
// stops.
func (p *copyPool) run(dir *sync.WaitGroup, from, dst, prev int, f func(from, dst, prev int) error) error {
	dir.Add(1)
	p.jobs <- func() {
		defer dir.Done()
		defer unix.Close(from)
		if p.failed() != nil {
			return
		}
		if err := f(from, dst, prev); err != nil {
			p.mu.Lock()
			if p.err == nil {
				p.err = err
			}
			p.mu.Unlock()
		}
	}
	return p.failed()
}

// failed is the first error of the pool's copies, nil so far (and for a
// nil pool).
func (p *copyPool) failed() error {
	if p == nil {
		return nil
	}
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
