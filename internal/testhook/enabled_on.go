//go:build mosaic_testhooks

package testhook

// Enabled: this is the binary the rig tests build with -tags
// mosaic_testhooks, never mosaic itself: the environment's hooks apply.
const Enabled = true
