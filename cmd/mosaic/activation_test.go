package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEgressStartsOnFirstUse (issue 39, speed): a plain default session
// that has made no connection has no egress proxy running (its socket
// unit holds the sockets) and no mosaic-net; `status` says what it allows
// without starting it; `mosaic allow` before any connection starts it and
// the grant holds; the session's first connection then works, through
// its network device (a client that ignores the proxy variables), which
// starts mosaic-net. The weakened mosaic starts both with the session, as
// before (MOSAIC_TEST_EGRESS_UP_FRONT, MOSAIC_TEST_NET_UP_FRONT): there
// the first assertions fail.
func TestEgressStartsOnFirstUse(t *testing.T) {
	n := needTestNet(t)
	t.Parallel()
	for _, tc := range []struct {
		label, bin string
		env        []string
		upFront    bool
	}{
		{"weakened", hookedMosaic(t), []string{"MOSAIC_TEST_EGRESS_UP_FRONT=1", "MOSAIC_TEST_NET_UP_FRONT=1"}, true},
		{"mosaic", mosaicBin, nil, false},
	} {
		t.Run(tc.label, func(t *testing.T) {
			name, ws := sessionName(t), workspace(t)
			// It waits for the test's word, then dials the test host
			// itself (bash's /dev/tcp: no proxy variable is read).
			script := "while [ ! -e go ]; do sleep 0.05; done; exec 3<>/dev/tcp/testhost.mosaic.test/443; timeout 5 cat <&3 >answer.tmp; mv answer.tmp answer; sleep 300"
			start := exec.Command(tc.bin, "start", "--direct", "--name", name, "--workspace", ws, "--", "bash", "-c", script)
			start.Env = append(os.Environ(), tc.env...)
			if out, err := start.CombinedOutput(); err != nil {
				t.Fatalf("start: %v %s", err, out)
			}
			defer mosaic(t, "rm", name)
			defer mosaic(t, "stop", name)
			proxy, unit := "mosaic-"+name+"-egress.service", "mosaic-"+name+".service"
			proxyUp := func() bool {
				st := unitProperty(t, proxy, "ActiveState")
				return st == "active" || st == "activating"
			}
			if tc.upFront {
				if !proxyUp() || !runsNet(t, unit) {
					t.Fatalf("the weakened session's proxy (up %v) or mosaic-net (%v) is not running: this test cannot see one started up front", proxyUp(), runsNet(t, unit))
				}
				return
			}
			if proxyUp() {
				t.Errorf("a default session that made no connection has its egress proxy running (%s)", proxy)
			}
			if runsNet(t, unit) {
				t.Error("a default session that made no connection runs mosaic-net")
			}
			if s := mustMosaic(t, "status", name).stdout; !strings.Contains(s, "allowed now: nothing yet") {
				t.Errorf("status of a session whose proxy has not started:\n%s", s)
			}
			if proxyUp() {
				t.Fatal("status started the egress proxy")
			}
			mustMosaic(t, "allow", name, "testhost.mosaic.test", n+".0/24")
			if !proxyUp() {
				t.Fatalf("mosaic allow answered, but the proxy is %s", unitProperty(t, proxy, "ActiveState"))
			}
			if s := mustMosaic(t, "status", name).stdout; !strings.Contains(s, "granted testhost.mosaic.test:443") {
				t.Errorf("status after the grant:\n%s", s)
			}
			if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			var answer []byte
			eventually(t, 20*time.Second, "the session's first connection answered", func() bool {
				answer, _ = os.ReadFile(filepath.Join(ws, "answer"))
				return answer != nil
			})
			if !strings.Contains(string(answer), "hello from testhost") {
				t.Errorf("the first connection, to a host granted before the proxy served any: %q", answer)
			}
			if !runsNet(t, unit) {
				t.Error("the session's connection went through, but no mosaic-net runs")
			}
		})
	}
}

// runsNet reports whether one of unit's processes is mosaic-net (bound
// in the sandbox at /run/mosaic/net).
func runsNet(t *testing.T, unit string) bool {
	t.Helper()
	cg := unitProperty(t, unit, "ControlGroup")
	for _, root := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		b, err := os.ReadFile(filepath.Join(root, cg, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, pid := range strings.Fields(string(b)) {
			if argv, _ := os.ReadFile("/proc/" + pid + "/cmdline"); strings.HasPrefix(string(argv), "/run/mosaic/net\x00") {
				return true
			}
		}
		return false
	}
	t.Fatalf("no cgroup.procs for %s (%s)", unit, cg)
	return false
}
