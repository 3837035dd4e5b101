package remote

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// holdWait is how long a hold keeps its frame for the remote-exec that the
// caller starts next; the caller's ssh closing its stdin ends it sooner.
const holdWait = 60 * time.Second

// holdName is a hold socket's name: only what Hold makes is ever connected
// to. It is compiled at first use, not at every start of mosaic.
var holdName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^hold-[0-9a-f]{32}\.sock$`) })

// HoldDir is where holds listen: under the runtime directory, which no
// session sees (mosaic hides $XDG_RUNTIME_DIR from every session).
func HoldDir(runtimeDir string) string { return filepath.Join(runtimeDir, "mosaic", "remote") }

// Hold reads a frame from in, listens on a new socket in dir (0700), prints
// the socket's path on out, and gives the frame to the first connection of a
// process of this same user; it returns once it did, when in reaches EOF
// (the caller's ssh went away), or after holdWait. The frame is never
// written to disk.
func Hold(in io.Reader, out io.Writer, dir string) error {
	f, err := ReadFrame(in)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("making %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	path := filepath.Join(dir, "hold-"+hex.EncodeToString(b[:])+".sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("listening on %s: %w", path, err)
	}
	defer l.Close() // removes the socket
	_ = l.SetDeadline(time.Now().Add(holdWait))
	go func() { // the caller gone: nobody will ask
		_, _ = io.Copy(io.Discard, in)
		_ = l.Close()
	}()
	if _, err := fmt.Fprintln(out, HeldMarker+path); err != nil {
		return err
	}
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return fmt.Errorf("nobody asked for the held credentials: %w", err)
		}
		if !sameUser(c) {
			c.Close()
			continue
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		err = WriteFrame(c, f)
		c.Close()
		return err
	}
}

// sameUser reports whether the peer runs as this process's user.
func sameUser(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil || cerr != nil {
		return false
	}
	return int(cred.Uid) == os.Getuid()
}

// Fetch takes the frame a Hold in dir keeps at path. Only a name Hold makes,
// directly in dir, is connected to.
func Fetch(dir, path string) (Frame, error) {
	if filepath.Dir(path) != filepath.Clean(dir) || !holdName().MatchString(filepath.Base(path)) {
		return Frame{}, errors.New("not a hold of mosaic's: " + path)
	}
	c, err := net.DialTimeout("unix", path, 10*time.Second)
	if err != nil {
		return Frame{}, fmt.Errorf("the held credentials are gone: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return ReadFrame(c)
}
