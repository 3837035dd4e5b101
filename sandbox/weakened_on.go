//go:build mosaic_weakened

package sandbox

// Weakened: see weakened_off.go. This build is for tests only.
const Weakened = true
