//go:build mosaic_testhooks

package sandbox

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// testHooks: the init takes its test-only options (the binary the race
// tests build with -tags mosaic_testhooks, never mosaic itself).
const testHooks = true

// testMarkHeld shows, while the init is held, that it takes signals as a
// held init does: it ignores SIGPWR (which nothing sends it), a mark the
// race tests read in /proc/PID/status (SigIgn) before they signal it.
func testMarkHeld(held bool) {
	if held {
		signal.Ignore(unix.SIGPWR)
		return
	}
	// Not Reset, which leaves it ignored, and the command would inherit
	// that: notified, then not, it has the Go runtime's handler again.
	c := make(chan os.Signal, 1)
	signal.Notify(c, unix.SIGPWR)
	signal.Stop(c)
}
