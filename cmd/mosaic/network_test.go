package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"mosaic/sandbox/escapes"
)

// needTestNet returns the rig's test network prefix (N of N.2, N.3), whose
// hosts are the only ones the network tests talk to besides loopback.
func needTestNet(t *testing.T) string {
	t.Helper()
	needRig(t)
	n := os.Getenv("MOSAIC_TESTNET")
	if n != "" {
		return n
	}
	if os.Getenv("CI") != "" {
		t.Fatal("CI must run the network tests: contrib/rig.sh makes the test network when ip and socat are installed")
	}
	t.Skip("needs contrib/rig.sh's test network (apt-get install iproute2 socat; make test)")
	return ""
}

// serve answers every connection on l with a line.
func serve(l net.Listener, line string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Write([]byte(line + "\n"))
		c.Close()
	}
}

func readLine(t *testing.T, network, addr string) string {
	t.Helper()
	c, err := net.DialTimeout(network, addr, 3*time.Second)
	if err != nil {
		return "unreachable: " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	s, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(s)
}

// netScript answers, from inside a session, whether it reached a test host
// directly, a loopback service of the host, and an abstract socket of the
// host.
const netScript = `
host=$1 port=$2 abstract=$3
c() { n=$1 want=$2; shift 2; if timeout 5 "$@" 2>/dev/null | grep -q "$want"; then echo "$n allowed"; else echo "$n denied"; fi; }
c route "hello from testhost" bash -c "exec 3<>/dev/tcp/$host/443 && cat <&3"
c host-loopback loopback-hello bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && cat <&3"
c host-abstract abstract-hello socat -u ABSTRACT-CONNECT:$abstract -
`

// TestNetworkNone: a session with network none reaches no host, no
// loopback service of the host and no abstract socket of the host, each
// first shown reachable from the host; a session with network host (the
// deliberately unconfined one) reaches exactly those three.
func TestNetworkNone(t *testing.T) {
	n := needTestNet(t)
	testhost := n + ".2"
	lo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Close()
	go serve(lo, "loopback-hello")
	abstract := "mosaic-test-" + randomHex()
	ab, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer ab.Close()
	go serve(ab, "abstract-hello")
	_, port, _ := net.SplitHostPort(lo.Addr().String())
	for addr, want := range map[string]string{testhost + ":443": "hello from testhost", lo.Addr().String(): "loopback-hello"} {
		if got := readLine(t, "tcp", addr); got != want {
			t.Fatalf("stand-in %s from the host: %q", addr, got)
		}
	}
	if got := readLine(t, "unix", "@"+abstract); got != "abstract-hello" {
		t.Fatalf("stand-in abstract socket from the host: %q", got)
	}
	if _, err := exec.LookPath("socat"); err != nil {
		t.Fatal("socat missing on the host")
	}

	check := func(t *testing.T, args ...string) map[string]string {
		argv := append([]string{"run", "--workspace", workspace(t)}, args...)
		argv = append(argv, "--", "sh", "-c", netScript, "sh", testhost, port, abstract)
		r := mosaic(t, argv...)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		return escapes.Parse(r.stdout) // "NAME ANSWER" lines, as the escape table's
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"none", []string{"--network", "none"}, "denied"},
		{"generic-default", nil, "denied"},
		{"none-scope", []string{"--network", "none", "--scope", "--direct"}, "denied"},
		{"allow", []string{"--network", "allow", "--allow-host", "testhost.mosaic.test"}, "denied"},
		{"landlock-none", []string{"--sandbox", "landlock", "--network", "none"}, "denied"},
		{"landlock-allow", []string{"--sandbox", "landlock", "--network", "allow", "--allow-host", "testhost.mosaic.test"}, "denied"},
		{"host-broken", []string{"--network", "host"}, "allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := check(t, tc.args...)
			for _, k := range []string{"route", "host-loopback", "host-abstract"} {
				want := tc.want
				if k == "host-abstract" && tc.name == "host-broken" {
					want = "denied" // the Landlock scoping closes them, see TestScoping
				}
				if got[k] != want {
					t.Errorf("%s: %q, want %s (all: %v)", k, got[k], want, got)
				}
			}
		})
	}
}

// connectScript asks the relay for a tunnel to each argument and prints the
// status line and the first line through it.
const connectScript = `
for target in "$@"; do
  exec 3<>/dev/tcp/127.0.0.1/3128
  printf 'CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n' "$target" "$target" >&3
  out=$(timeout 5 cat <&3 | tr -d '\r' | grep -v '^$' | tr '\n' '|')
  exec 3<&-
  echo "$target $out"
done
echo "proxy=$HTTPS_PROXY"
`

// TestNetworkAllow: through the egress proxy the allowed test host answers;
// another host, an IP literal and an allowed name resolving to a private
// address are refused with 403 and a journal line naming the session and
// the host; the egress unit runs while the session does, and goes when it
// is stopped or killed.
func TestNetworkAllow(t *testing.T) {
	n := needTestNet(t)
	name := sessionName(t)
	egress := "mosaic-" + name + "-egress.service"
	ip := n + ".2:443"
	// The test hosts live in a documentation or benchmarking range, which
	// the proxy refuses unless the allowlist names it (issue 14).
	r := mosaic(t, "run", "--name", name, "--workspace", workspace(t), "--network", "allow",
		"--allow-host", "testhost.mosaic.test", "--allow-host", "private.mosaic.test", "--allow-host", n+".0/24", "--",
		"bash", "-c", connectScript, "bash", "testhost.mosaic.test:443", "otherhost.mosaic.test:443", ip, "private.mosaic.test:443")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := map[string]string{
		"testhost.mosaic.test:443":  "HTTP/1.1 200 Connection established|hello from testhost|",
		"otherhost.mosaic.test:443": "403 Forbidden",
		ip:                          "403 Forbidden",
		"private.mosaic.test:443":   "403 Forbidden",
	}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		target, out, _ := strings.Cut(line, " ")
		if w, ok := want[target]; ok {
			if !strings.Contains(out, w) {
				t.Errorf("CONNECT %s: %q, want %q", target, out, w)
			}
			delete(want, target)
		}
	}
	if len(want) > 0 || !strings.Contains(r.stdout, "proxy=http://127.0.0.1:3128") {
		t.Errorf("missing answers %v:\n%s", want, r.stdout)
	}
	var journal string
	eventually(t, 10*time.Second, "the egress proxy's refusals in the journal", func() bool {
		out, _ := exec.Command("journalctl", "--user", "-t", "mosaic-"+name+"-egress", "--no-pager", "-o", "cat").Output()
		journal = string(out)
		return strings.Count(journal, "refused CONNECT") >= 3
	})
	for _, want := range []string{
		"session " + name + ": refused CONNECT otherhost.mosaic.test:443",
		"session " + name + ": refused CONNECT " + ip + ": " + n + ".2 is an IP address",
		"session " + name + ": refused CONNECT private.mosaic.test:443: private.mosaic.test resolves to 10.255.255.1, a private address",
		"session " + name + ": tunnel to testhost.mosaic.test:443",
	} {
		if !strings.Contains(journal, want) {
			t.Errorf("journal lacks %q:\n%s", want, journal)
		}
	}
	eventually(t, 10*time.Second, "the egress unit to go with its run", func() bool {
		return unitProperty(t, egress, "ActiveState") != "active"
	})

	t.Run("special-range", func(t *testing.T) {
		r := mosaic(t, "run", "--workspace", workspace(t), "--allow-host", "testhost.mosaic.test", "--",
			"bash", "-c", connectScript, "bash", "testhost.mosaic.test:443")
		if r.code != 0 || !strings.Contains(r.stdout, "403 Forbidden") || !strings.Contains(r.stdout, "allow it explicitly with --allow-host "+n+".2") {
			t.Errorf("a test host in a special range, not named: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("landlock", func(t *testing.T) {
		// The relay's port is the one TCP connect Landlock allows there.
		r := mosaic(t, "run", "--sandbox", "landlock", "--workspace", workspace(t), "--network", "allow",
			"--allow-host", "testhost.mosaic.test", "--allow-host", n+".0/24", "--", "bash", "-c", connectScript, "bash", "testhost.mosaic.test:443")
		if r.code != 0 || !strings.Contains(r.stdout, "HTTP/1.1 200 Connection established|hello from testhost|") {
			t.Errorf("exit %d, want a tunnel to testhost:\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("lifetime", func(t *testing.T) {
		for _, kill := range []bool{false, true} {
			name := sessionName(t)
			egress, sockets := "mosaic-"+name+"-egress.service", "mosaic-"+name+"-egress.socket"
			mustMosaic(t, "start", "--name", name, "--workspace", workspace(t), "--allow-host", "testhost.mosaic.test", "--", "sleep", "300")
			if s := unitProperty(t, sockets, "ActiveState"); s != "active" {
				t.Fatalf("the egress socket unit is %s while its session runs", s)
			}
			// The proxy starts on the first connection: a grant's starts it.
			// The proxy answered the grant, so it runs; systemd may take
			// its READY a moment later (activating until then, under load).
			mustMosaic(t, "allow", name, "otherhost.mosaic.test")
			eventually(t, 10*time.Second, "the egress unit to be active once a grant was made", func() bool {
				return unitProperty(t, egress, "ActiveState") == "active"
			})
			st := mustMosaic(t, "status", "--json", name).stdout
			if !strings.Contains(st, `"network": "allow"`) || !strings.Contains(st, "testhost.mosaic.test:443") {
				t.Errorf("status does not show the network: %s", st)
			}
			if kill {
				systemctl(t, "kill", "--signal=SIGKILL", "mosaic-"+name+".service")
			} else {
				mustMosaic(t, "stop", name)
			}
			eventually(t, 10*time.Second, "the egress units to stop with their session (kill "+strconv.FormatBool(kill)+")", func() bool {
				s, so := unitProperty(t, egress, "ActiveState"), unitProperty(t, sockets, "ActiveState")
				return (s == "inactive" || s == "failed" || s == "") && (so == "inactive" || so == "failed" || so == "")
			})
		}
	})
}

// TestNetworkBadInput: a bad mode or host is bad input and starts nothing.
func TestNetworkBadInput(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	for _, args := range [][]string{
		{"--network", "wifi"},
		{"--allow-host", "bad_name"},
		{"--allow-host", "example.com:70000"},
		{"--network", "none", "--allow-host", "example.com"},
		{"--network", "host", "--allow-host", "example.com"},
	} {
		argv := append([]string{"run", "--json", "--workspace", ws}, args...)
		r := mosaic(t, append(argv, "--", "true")...)
		code, _ := jsonError(t, r)
		if r.code != 2 || (code != "bad-network" && code != "bad-allow-host") {
			t.Errorf("%v: exit %d code %s", args, r.code, code)
		}
	}
	if u := mosaicUnits(t); strings.Contains(u, "egress") {
		t.Errorf("units left behind: %s", u)
	}
}

// TestEgressDeathStopsSession (31.14): the egress proxy killed, the session
// is stopped with it, and status says the proxy died, while it stops and
// once it ended. The weakened mosaic (Requires= in place of BindsTo=) is
// shown first: its session runs on, and status says the proxy is dead.
func TestEgressDeathStopsSession(t *testing.T) {
	needRig(t)
	t.Parallel()
	for _, tc := range []struct {
		label, bin string
		env        []string
		stops      bool
	}{
		{"weakened", hookedMosaic(t), []string{"MOSAIC_TEST_EGRESS_REQUIRES=1"}, false},
		{"mosaic", mosaicBin, nil, true},
	} {
		t.Run(tc.label, func(t *testing.T) {
			name := sessionName(t)
			start := exec.Command(tc.bin, "start", "--name", name, "--workspace", workspace(t), "--network", "allow", "--allow-host", "testhost.mosaic.test", "--", "sleep", "300")
			start.Env = append(os.Environ(), tc.env...)
			if out, err := start.CombinedOutput(); err != nil {
				t.Fatalf("start: %v %s", err, out)
			}
			defer mosaic(t, "rm", name)
			defer mosaic(t, "stop", name)
			proxy := "mosaic-" + name + "-egress.service"
			// Its proxy starts on the first connection: a grant's starts it.
			mustMosaic(t, "allow", name, "otherhost.mosaic.test")
			systemctl(t, "kill", "--signal", "KILL", proxy)
			eventually(t, 10*time.Second, "the proxy to be dead", func() bool {
				st := unitProperty(t, proxy, "ActiveState")
				return st == "failed" || st == "inactive"
			})
			// systemd queues the session's stop as it takes the proxy's
			// death (BindsTo=): by now it is stopping or stopped.
			st := unitProperty(t, "mosaic-"+name+".service", "ActiveState")
			if !tc.stops {
				if st != "active" || strings.Contains(systemctl(t, "list-jobs", "--no-legend", "--plain"), "mosaic-"+name+".service") {
					t.Fatalf("the weakened session is %s, with a job: this test cannot see a session that runs on", st)
				}
				if s := mustMosaic(t, "status", name).stdout; !strings.Contains(s, "DIED: no network") {
					t.Errorf("status of a running session whose proxy died does not say so:\n%s", s)
				}
				return
			}
			if st == "active" && !strings.Contains(systemctl(t, "list-jobs", "--no-legend", "--plain"), "mosaic-"+name+".service") {
				t.Fatalf("the proxy is dead and the session runs on, with no stop under way")
			}
			eventually(t, 15*time.Second, "the session to end", func() bool {
				s, _ := statusOf(t, name)
				return s.State == "inactive" || s.State == "failed"
			})
			var js struct {
				EgressDied bool `json:"egress_died"`
			}
			r := mustMosaic(t, "status", "--json", name)
			if json.Unmarshal([]byte(r.stdout), &js); !js.EgressDied {
				t.Errorf("status --json does not say the proxy died: %s", r.stdout)
			}
			if s := mustMosaic(t, "status", name).stdout; !strings.Contains(s, "DIED, and the session was stopped with it") {
				t.Errorf("status does not say the proxy died:\n%s", s)
			}
		})
	}
}
