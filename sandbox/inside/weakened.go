package inside

import "mosaic/sandbox"

// weakened is sandbox.Weakened: a test build's (go build -tags
// mosaic_weakened) defences turned off, so that each attack the rig tests
// make is first shown to work.
const weakened = sandbox.Weakened
