package statedir

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"mosaic/internal/testhook"
)

// testMkdirError, under MOSAIC_TEST_ENOSPC_UNDER=DIR (a test build only,
// package testhook), fails the making of a socket directory under DIR
// with ENOSPC: a full runtime directory (a tmpfs in memory, which a test
// cannot fill without filling the machine's memory) made deterministic.
func testMkdirError(path string) error {
	if dir := testhook.Value("MOSAIC_TEST_ENOSPC_UNDER"); dir != "" && strings.HasPrefix(path, dir+"/") {
		return &os.PathError{Op: "mkdir", Path: path, Err: unix.ENOSPC}
	}
	return nil
}
