//go:build !mosaic_testhooks

package statedir

// Without the mosaic_testhooks build tag the test hooks do nothing; see
// testhook_on.go.

func testMkdirError(string) error { return nil }
