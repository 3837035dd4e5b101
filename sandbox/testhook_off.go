//go:build !mosaic_testhooks

package sandbox

// testHooks is off in every real build: the init has no test-only options.
const testHooks = false
