//go:build mosaic_testhooks

package statedir

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// testMkdirError, under MOSAIC_TEST_ENOSPC_UNDER=DIR, fails the making of
// a socket directory under DIR with ENOSPC: a full runtime directory (a
// tmpfs in memory, which a test cannot fill without filling the machine's
// memory) made deterministic. Compiled only into the test hooks' build, as
// manager's hooks (manager/testhook_on.go).
func testMkdirError(path string) error {
	if dir := os.Getenv("MOSAIC_TEST_ENOSPC_UNDER"); dir != "" && strings.HasPrefix(path, dir+"/") {
		return &os.PathError{Op: "mkdir", Path: path, Err: unix.ENOSPC}
	}
	return nil
}
