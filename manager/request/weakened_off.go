//go:build !mosaic_weakened

package request

// weakened binds a toolchain's directory whole, its prefixSecrets with it,
// as mosaic did before issue 40. Only a test build (go build -tags
// mosaic_weakened) sets it, so that the rig test first shows the token read
// inside; no release build can.
const weakened = false
