//go:build !mosaic_weakened

package patchcheck

// weakened is true only in a test build (-tags mosaic_weakened) whose
// Check accepts everything, which the attack tests use to show that an
// attack they then see refused works without it.
const weakened = false
