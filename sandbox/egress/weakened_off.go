//go:build !mosaic_weakened

package egress

// Weakened, only in a test build (go build -tags mosaic_weakened), puts
// the control socket in the egress directory the session sees, lets the
// proxy answer a client inside mosaic.slice, and forwards every GraphQL
// request to GitHub's API with the token lent for pr, so that the rig's
// attacks on the control path and on a lent pr are first shown to work;
// no release build can.
const Weakened = false
