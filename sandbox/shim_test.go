package sandbox

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// What Shim.Argv writes, ParseShim reads back; bwrap's own options (which
// start with --) are never taken for the shim's.
func TestShimRoundTrip(t *testing.T) {
	for _, s := range []Shim{
		{Promise: "{}", Bwrap: "/usr/bin/bwrap", Args: []string{"--unshare-user", "--", "/run/mosaic/init"}},
		{Promise: "{\"a\":1}", Drop: "/run/user/1/mosaic/credentials/x/env", Bwrap: "/b", Args: []string{"--die-with-parent"}},
		{Promise: "{}", InitArgs: "/s/init-args", Bwrap: "/b", Args: []string{"--", "/run/mosaic/init", "init"}},
	} {
		argv := s.Argv("/bin/mosaic")
		if argv[0] != "/bin/mosaic" || argv[1] != ShimStage {
			t.Fatalf("argv %v", argv)
		}
		got, err := ParseShim(argv[2:])
		if err != nil || !reflect.DeepEqual(got, s) {
			t.Errorf("ParseShim(%v) = %+v, %v; want %+v", argv[2:], got, err, s)
		}
	}
	for _, bad := range [][]string{{"--promise", "{}"}, {"/usr/bin/bwrap"}, {"--wait-fd", "1", "--promise", "{}", "/b"}, {"--odd", "x", "/b"}} {
		if _, err := ParseShim(bad); err == nil {
			t.Errorf("ParseShim(%v) accepted", bad)
		}
	}
}

// TestInitArgvThroughMemfd: the init's arguments leave bwrap's argv for a
// sealed memfd and come back from it byte for byte, however many.
func TestInitArgvThroughMemfd(t *testing.T) {
	init := append([]string{"init", "--session", "s"}, "--", "sh", "-c", "a b", "", "x\ny", "\t")
	for i := 0; i < 30000; i++ {
		init = append(init, "arg")
	}
	argv := append([]string{"--ro-bind", "/usr", "/usr", "--", InitPath}, init...)
	moved, inline, err := InitArgsAside(Shim{Args: argv})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(inline, "\x00") != strings.Join(argv, "\x00") {
		t.Fatal("the inline argv (for InitEnv) is not bwrap's with the init's arguments")
	}
	if len(moved) != 8 || moved[5] != "init" || moved[6] != InitArgvFD {
		t.Fatalf("bwrap's argv is %q", moved)
	}
	back, err := ReadInitArgv(moved[7])
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "init-args")
	os.WriteFile(file, EncodeInitArgs(init[1:]), 0o600)
	fromFile, inlineFile, err := InitArgsAside(Shim{Args: []string{"--ro-bind", "/usr", "/usr", "--", InitPath, "init"}, InitArgs: file})
	if err != nil || len(fromFile) != 8 {
		t.Fatalf("from a file: %q, %v", fromFile, err)
	}
	// The names the init passes on are read from the file's arguments.
	if strings.Join(inlineFile, "\x00") != strings.Join(argv, "\x00") {
		t.Fatal("from a file, the inline argv (for InitEnv) lacks the init's arguments")
	}
	if again, err := ReadInitArgv(fromFile[7]); err != nil || strings.Join(again, "\x00") != strings.Join(back, "\x00") {
		t.Fatalf("from a file the arguments differ (%v)", err)
	}
	if len(back) != len(init)-1 {
		t.Fatalf("%d arguments came back, want %d", len(back), len(init)-1)
	}
	for i := range back {
		if back[i] != init[i+1] {
			t.Fatalf("argument %d is %q, want %q", i, back[i], init[i+1])
		}
	}
}
