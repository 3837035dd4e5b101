package main

import (
	"errors"
	"reflect"
	"testing"

	"mosaic/internal/errcode"
)

// What --host sends for a run: the credentials named, read here, travel
// as the frame's secrets and leave the command line; --pass-env's value
// travels as --env; every other option and the command as given.
func TestFrameForTakesCredentials(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	env := map[string]string{"MY_TOKEN": "tok-1", "MODEL_NAME": "m1"}
	lookup := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	f, err := frameFor([]string{"run", "--credential", "MY_TOKEN", "--pass-env=MODEL_NAME", "--name", "x", "--direct", "--", "cmd", "--credential", "y"}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"run", "--env", "MODEL_NAME=m1", "--name", "x", "--direct", "--", "cmd", "--credential", "y"}; !reflect.DeepEqual(f.Args, want) {
		t.Errorf("args %q, want %q", f.Args, want)
	}
	if want := map[string]string{"MY_TOKEN": "tok-1"}; !reflect.DeepEqual(f.Secrets, want) {
		t.Errorf("secrets %v, want %v", f.Secrets, want)
	}
	if _, err := frameFor([]string{"start", "--pass-env", "UNSET", "--", "cmd"}, lookup); !errors.Is(err, errcode.BadEnv.Target()) {
		t.Errorf("--pass-env of an unset variable: %v, want bad-env", err)
	}
	if f, err := frameFor([]string{"list", "--credential", "MY_TOKEN"}, lookup); err != nil || f.Secrets != nil || len(f.Args) != 3 {
		t.Errorf("list: %+v, %v: want its arguments as they are", f, err)
	}
}
