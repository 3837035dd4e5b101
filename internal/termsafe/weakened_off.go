//go:build !mosaic_weakened

package termsafe

// weakened makes Filter pass everything, as attach and run --pty did
// before issue 40. Only a test build (go build -tags mosaic_weakened) sets
// it, so that the rig test first shows the clipboard and the queries reach
// the user's terminal; no release build can.
const weakened = false
