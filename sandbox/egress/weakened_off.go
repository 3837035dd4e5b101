//go:build !mosaic_weakened

package egress

// Weakened, only in a test build (go build -tags mosaic_weakened), lets
// the proxy answer a control client inside mosaic.slice and binds the
// control directory into the session (manager), so that the rig's attack
// on the control path is first shown to work; no release build can.
const Weakened = false
