package acceptloop

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// failing is a listener whose next fails Accepts fail with err, as a
// process out of descriptors sees them (EMFILE).
type failing struct {
	net.Listener
	fails int
	err   error
}

func (f *failing) Accept() (net.Conn, error) {
	if f.fails > 0 {
		f.fails--
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", f.err)}
	}
	return f.Listener.Accept()
}

func listen(t *testing.T) (net.Listener, string) {
	path := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	return l, path
}

// A listener whose Accept fails (EMFILE) keeps serving: the connection
// made meanwhile is accepted once the failures pass.
func TestServeOutlivesEMFILE(t *testing.T) {
	l, path := listen(t)
	f := &failing{Listener: l, fails: 3, err: syscall.EMFILE}
	served := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(f, func(c net.Conn) { c.Close(); served <- struct{}{} })
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-served:
	case err := <-done:
		t.Fatalf("Serve ended on a passing Accept error: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the connection was never served")
	}
	l.Close()
	if err := <-done; err != nil {
		t.Errorf("Serve of a closed listener: %v, want nil", err)
	}
}

// An Accept error that does not pass ends the loop, with that error.
func TestServeEndsOnAnotherError(t *testing.T) {
	l, _ := listen(t)
	defer l.Close()
	f := &failing{Listener: l, fails: 1, err: syscall.EINVAL}
	if err := Serve(f, func(c net.Conn) { c.Close() }); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Serve = %v, want the EINVAL", err)
	}
}
