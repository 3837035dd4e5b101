//go:build !mosaic_testhooks

package testhook

// Enabled is off in every real build: the environment holds no hook.
const Enabled = false
