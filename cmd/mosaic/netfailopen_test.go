package main

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestUnitNetworkFailedOpen: a service's sandbox makes no network
// namespace of its own (its bwrap shares the unit's), so the unit's
// PrivateNetwork= alone keeps it off the host's network, and systemd runs
// a unit without it when it cannot make the namespace ("PrivateNetwork=yes
// is configured, but network namespace setup failed, ignoring"). The
// hooked build drops the property as that fail-open would
// (MOSAIC_TEST_UNIT_HOST_NETWORK=1). Against the weakened build, whose
// shim and init do not check the network namespace, the command then
// reaches a loopback service of the host; mosaic's shim refuses to run it.
func TestUnitNetworkFailedOpen(t *testing.T) {
	needRig(t)
	lo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Close()
	go serve(lo, "loopback-hello")
	_, port, _ := net.SplitHostPort(lo.Addr().String())
	ws := workspace(t)
	for _, tc := range []struct {
		label, bin string
		weak       bool
	}{
		{"weakened", taggedMosaic(t, "mosaic_testhooks,mosaic_weakened"), true},
		{"mosaic", hookedMosaic(t), false},
	} {
		t.Run(tc.label, func(t *testing.T) {
			cmd := exec.Command(tc.bin, "run", "--workspace", ws, "--network", "none",
				"--", "bash", "-c", `exec 3<>/dev/tcp/127.0.0.1/$1 && timeout 5 cat <&3`, "sh", port)
			cmd.Env = append(os.Environ(), "MOSAIC_TEST_UNIT_HOST_NETWORK=1")
			r := runResult(t, cmd)
			reached := strings.Contains(r.stdout, "loopback-hello")
			if tc.weak {
				if !reached {
					t.Fatalf("the weakened session did not reach the host's loopback (exit %d %s %s): this test proves nothing", r.code, r.stdout, r.stderr)
				}
				return
			}
			t.Logf("exit %d: %s", r.code, strings.TrimSpace(r.stderr))
			if reached || r.code == 0 || !strings.Contains(r.stderr, "net namespace") {
				t.Errorf("a unit in the host's network namespace: exit %d, stdout %q, stderr %q; want the shim's refusal", r.code, r.stdout, r.stderr)
			}
		})
	}
}
