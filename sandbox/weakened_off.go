//go:build !mosaic_weakened

package sandbox

// Weakened turns off the defences that leave no trace on the host (the
// init's non-dumpable state, the shim's minimal environment, the syscall
// filter, the Landlock scoping, the shim's and the init's check that the
// network namespace is not the host's). Only a test build (go build -tags mosaic_weakened) sets it, so
// that each attack the rig tests make is first shown to work; no release
// build can.
const Weakened = false
