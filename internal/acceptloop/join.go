package acceptloop

import (
	"io"
	"net"
	"sync"
)

// Join copies both ways between a and b until both directions are done,
// each direction's end passed on as a half-close (CloseWrite). buf, when
// not 0, is each direction's buffer; 0 leaves io.Copy its own, and with it
// the kernel's splice between sockets that have one.
func Join(a, b net.Conn, buf int) {
	copyBoth := func(dst, src net.Conn) {
		if buf > 0 {
			pool := buffers(buf)
			b := pool.Get().(*[]byte)
			_, _ = io.CopyBuffer(dst, src, *b)
			pool.Put(b)
		} else {
			_, _ = io.Copy(dst, src)
		}
		CloseWrite(dst)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		copyBoth(b, a)
	}()
	copyBoth(a, b)
	wg.Wait()
}

// pools keeps Join's buffers for the next connection, a sync.Pool per
// size: a new connection through mosaic-net (1 MiB each way) allocated,
// and had the runtime zero, 2 MiB before its first byte.
var pools sync.Map // int -> *sync.Pool

// buffers is the pool of buffers of size bytes.
func buffers(size int) *sync.Pool {
	if p, ok := pools.Load(size); ok {
		return p.(*sync.Pool)
	}
	p, _ := pools.LoadOrStore(size, &sync.Pool{New: func() any { b := make([]byte, size); return &b }})
	return p.(*sync.Pool)
}

// CloseWrite ends c's writing half, or c where it has none.
func CloseWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = c.Close()
	}
}
