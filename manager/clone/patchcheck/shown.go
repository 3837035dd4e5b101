package patchcheck

import (
	"crypto/sha256"
	"encoding/hex"
)

// ShownKey names a change as mosaic diff showed it: its patch's hash, or,
// for a patch over apply's bound (diff lists its files, apply --branch
// takes its bundle), the snapshot's commit.
func ShownKey(patch []byte, overBound bool, head string) string {
	if overBound {
		return "head " + head
	}
	sum := sha256.Sum256(patch)
	return "sha256 " + hex.EncodeToString(sum[:])
}

// CheckShown refuses a change (key) other than the one mosaic diff last
// showed (shown; "" when diff never showed one): an agent that saw its
// snapshot taken (its copy's refs/mosaic/snapshot) could change its work
// once the user had read it, and apply would write what no one read.
func CheckShown(shown, key string) error {
	if weakened || shown == "" || shown == key {
		return nil
	}
	return refuse("", "it is not the change `mosaic diff` last showed you: the session changed its work after")
}
