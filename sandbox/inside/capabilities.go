package inside

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DropCapabilities takes every capability from every thread of this
// process (ambient, inheritable, permitted and effective sets), so that
// nothing it execs has one. (The bounding set stays: dropping from it
// needs CAP_SETPCAP, and with the other sets empty and NoNewPrivileges no
// exec can gain what it bounds; bwrap empties it inside the sandbox.) The unit gives the exec shim of a
// session with the network device the two it needs to make it
// (AmbientCapabilities: CAP_NET_ADMIN, CAP_NET_BIND_SERVICE, over the
// unit's own user and network namespaces), which an exec by the non-root
// user keeps: the shim drops them once the device is made, before it
// execs bwrap. A thread's sets are its own, so each syscall runs on every
// thread (syscall.AllThreadsSyscall, which needs a build without cgo: with
// cgo the shim refuses to go on while it holds a capability).
func DropCapabilities() error {
	held, err := heldCapabilities()
	if err != nil || !held {
		return err
	}
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); e != 0 {
		return fmt.Errorf("cannot drop the shim's ambient capabilities: %w (build mosaic with CGO_ENABLED=0)", e)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("cannot drop the shim's capabilities: %w", e)
	}
	if held, err := heldCapabilities(); err != nil || held {
		return fmt.Errorf("the shim still holds a capability after dropping them all (%v)", err)
	}
	return nil
}

// heldCapabilities reports whether this thread's status shows any
// capability in a set but the bounding one.
func heldCapabilities() (bool, error) {
	b, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		return false, fmt.Errorf("cannot read the shim's capabilities: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(k, "Cap") || k == "CapBnd" {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err != nil || n != 0 {
			return true, nil
		}
	}
	return false, nil
}
