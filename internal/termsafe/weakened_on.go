//go:build mosaic_weakened

package termsafe

// weakened: see weakened_off.go. This build is for tests only.
const weakened = true
