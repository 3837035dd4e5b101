package sandbox

import (
	"os"
	"strings"
)

// Outside is what a promise compares a session's unit against: the user
// and mount namespaces and /tmp of the systemd manager that starts it. A
// mosaic process in the manager's namespaces reads them from itself
// (HereOutside). One in namespaces of its own (mosaic-bus.service, which
// systemd confines) would see its own, and a session whose unit failed open
// into the manager's would pass the check: it takes the outside recorded by
// an unconfined step of its unit instead.
type Outside struct {
	NS    map[string]string `json:"ns"`
	TmpID string            `json:"tmp_id"`
}

// HereOutside is the outside as this process sees it.
func HereOutside() Outside { return Outside{NS: Namespaces(), TmpID: FileID("/tmp")} }

// Apply makes the promise compare against o.
func (p *Promise) Apply(o Outside) { p.NS, p.TmpID = o.NS, o.TmpID }

// InOwnUserNamespace reports whether this process runs in a user namespace
// other than the initial one, whose uid_map maps every ID to itself: as a
// unit with PrivateUsers=yes does.
func InOwnUserNamespace() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return true // cannot tell: assume the worse
	}
	return strings.Join(strings.Fields(string(b)), " ") != "0 0 4294967295"
}
