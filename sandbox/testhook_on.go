//go:build mosaic_testhooks

package sandbox

// testHooks: the init takes its test-only options (the binary the race
// tests build with -tags mosaic_testhooks, never mosaic itself).
const testHooks = true
