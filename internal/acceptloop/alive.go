package acceptloop

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// HoldAlive marks a server as running for as long as its process lives:
// it makes path and holds an exclusive flock on it, which the kernel lets
// go when the process ends however it ends (killed, out of memory). A
// server that systemd starts on its first connection (socket activation)
// needs it: its socket answers whether it runs or not, so a dial tells
// nothing. A shared lock a reader (Alive) holds for a moment is waited
// out; one held for longer (the server's readers cannot hold it: see
// Alive) leaves the server unmarked, which it logs, rather than not
// serving.
func HoldAlive(path string) error {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(200 * time.Millisecond)
	for {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil || !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err != nil {
		unix.Close(fd)
		return err
	}
	return nil // the descriptor stays open, and the lock held, until exit
}

// Alive reports whether the server that marks path (HoldAlive) ever
// started (the file is there) and whether it runs now (its lock is held).
// It takes a shared lock for a moment, never blocking.
func Alive(path string) (started, running bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist), false
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return true, errors.Is(err, unix.EWOULDBLOCK)
	}
	return true, false // closing the descriptor lets the shared lock go
}
