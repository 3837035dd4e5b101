//go:build !mosaic_testhooks

package manager

import (
	"os"

	"mosaic/credentials"

	sd "github.com/coreos/go-systemd/v22/dbus"
)

// Without the mosaic_testhooks build tag (every real build) the test hooks
// do nothing; see testhook_on.go.

func testPauseAfterCheck() {}

func testSkipBindIdentity() bool { return false }

func testExtraRO() []string { return nil }

func testScopeOutside() bool { return false }

func testNoScopePromise() bool { return false }

func testSignalWhileHeld(chan os.Signal) {}

func testScopeSuspendable() bool { return false }

func testInitOptions() []string { return nil }

func testNoAwaitHeld() bool { return false }

func testSignalAtRelease(func(os.Signal)) {}

func testReleaseBytes(b []byte) []byte { return b }

func testPauseHeld() {}

func testBlindToStop() bool { return false }

func testCredentialsOnDisk(string, []credentials.Var) {}

func testUnitProperties(p []sd.Property) []sd.Property { return p }

func testNoTie() bool { return false }

func testLoseAtStart(*Manager) {}

func testUndoOnLoss() bool { return false }
