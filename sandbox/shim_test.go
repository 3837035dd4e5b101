package sandbox

import (
	"reflect"
	"testing"
)

// What Shim.Argv writes, ParseShim reads back; bwrap's own options (which
// start with --) are never taken for the shim's.
func TestShimRoundTrip(t *testing.T) {
	for _, s := range []Shim{
		{Promise: "{}", Bwrap: "/usr/bin/bwrap", Args: []string{"--unshare-user", "--", "/run/mosaic/init"}},
		{WaitFD: ScopeGoFD, Promise: "{\"a\":1}", Drop: "/run/user/1/mosaic/credentials/x/env", Bwrap: "/b", Args: []string{"--die-with-parent"}},
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
