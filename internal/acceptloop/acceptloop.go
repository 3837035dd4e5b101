// Package acceptloop accepts a listener's connections as net/http's Server
// does: an Accept that fails because the process or the system is out of
// something for a moment (EMFILE, ENFILE, ENOBUFS, ENOMEM, a connection
// aborted before it was accepted) is retried after a pause that doubles
// from 5 ms to 1 s, so a server outlives a burst of connections instead of
// staying up with nothing listening; only a closed listener, or an error of
// another kind, ends the loop. Join is the relay such a server's handler
// runs: both directions copied, each end passed on as a half-close.
// HoldAlive and Alive mark a server's process alive, for a server whose
// socket systemd holds (socket activation), which answers whether it runs.
package acceptloop

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"
)

// Serve calls handle with each connection l accepts, in turn (handle
// starts what must run beside the loop), until l is closed (nil) or
// Accept fails for good (that error).
func Serve(l net.Listener, handle func(net.Conn)) error {
	var pause time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			if !passing(err) {
				return err
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			time.Sleep(pause)
			continue
		}
		pause = 0
		handle(c)
	}
}

// passing reports whether an Accept's error is one that passes: the
// listener is still there.
func passing(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR, syscall.EAGAIN} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// DialStarting connects to the unix socket path of a server that may still
// be starting: while the socket is not there or nobody listens on it, it
// tries again every 10 ms, up to wait (the client side of a unit started
// beside its client rather than before it).
func DialStarting(ctx context.Context, path string, wait time.Duration) (net.Conn, error) {
	var d net.Dialer
	deadline := time.Now().Add(wait)
	for {
		c, err := d.DialContext(ctx, "unix", path)
		if err == nil || time.Now().After(deadline) || !(errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)) {
			return c, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
