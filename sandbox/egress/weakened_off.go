//go:build !mosaic_weakened

package egress

// Weakened, only in a test build (go build -tags mosaic_weakened), puts
// the control socket in the egress directory the session sees and lets the
// proxy answer a client inside mosaic.slice, so that the rig's attack on
// the control path is first shown to work; no release build can.
const Weakened = false
