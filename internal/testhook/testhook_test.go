package testhook

import "testing"

// A function set for a point runs at Call until its test ends; in this
// (untagged) build the environment's hooks are off whatever it holds.
func TestSetAndCall(t *testing.T) {
	var got string
	t.Run("set", func(t *testing.T) {
		Set(t, "point", func(arg string) { got = arg })
		Call("point", "a")
	})
	Call("point", "b") // its test is over
	if got != "a" {
		t.Errorf("got %q, want only the call made while it was set", got)
	}
	t.Setenv("MOSAIC_TEST_X", "1")
	if !Enabled && (Flag("MOSAIC_TEST_X") || Value("MOSAIC_TEST_X") != "") {
		t.Error("an untagged build read a hook from the environment")
	}
}
