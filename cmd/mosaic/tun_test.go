package main

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// tunScript tries, from inside a session, connections that take no proxy
// (bash's /dev/tcp: a client that ignores HTTPS_PROXY, as JVMs, gRPC,
// database clients and ssh do) and DNS, printing one line each:
// NAME ok|refused, with how long it took.
const tunScript = `
n=$1
try() { name=$1; shift; s=$(date +%s%N); if out=$(timeout 8 "$@" 2>&1) ; then r="ok $out"; else r=refused; fi; echo "$name $r $(( ($(date +%s%N) - s) / 1000000 ))ms"; }
try port5432 bash -c 'exec 3<>/dev/tcp/testhost.mosaic.test/5432 && head -1 <&3'
try port443 bash -c 'exec 3<>/dev/tcp/testhost.mosaic.test/443 && head -1 <&3'
try other bash -c 'exec 3<>/dev/tcp/otherhost.mosaic.test/443 && head -1 <&3'
try literal bash -c "exec 3<>/dev/tcp/$n.3/443 && head -1 <&3"
try dns-allowed getent hosts testhost.mosaic.test
try dns-refused getent hosts otherhost.mosaic.test
try udp-out bash -c "echo leak >/dev/udp/$n.1/5353"
try caps bash -c 'grep -E "^Cap(Inh|Prm|Eff|Amb)" /proc/self/status | grep -v "0000000000000000" && exit 1 || true'
`

// TestEveryConnectionThroughTheProxy (issue 39): in network allow, a
// client that ignores the proxy variables reaches an allowed HOST:PORT on
// any port, by name, through the session's network device and the egress
// proxy; a name not allowed does not resolve (NXDOMAIN at once, not a
// hang), an address literal is refused at once (the proxy connects to
// names only), and both refusals are recorded with the line that grants
// them; UDP other than DNS leaves nothing (a listener of the test's on the
// test network hears nothing); the command holds no capability. Each is
// shown first the other way: a session with network host reaches the
// test hosts directly (the test network routes there), and a listener
// hears its UDP.
func TestEveryConnectionThroughTheProxy(t *testing.T) {
	n := needTestNet(t)
	udp, err := net.ListenPacket("udp", n+".1:5353")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	heard := make(chan string, 8)
	go func() {
		buf := make([]byte, 100)
		for {
			k, _, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			heard <- string(buf[:k])
		}
	}()

	host := mosaic(t, "run", "--network", "host", "--workspace", workspace(t), "--", "bash", "-c", tunScript, "bash", n)
	if !strings.Contains(host.stdout, "literal ok hello from otherhost") {
		t.Fatalf("with network host the literal address is reached (the test's control):\n%s%s", host.stdout, host.stderr)
	}
	select {
	case <-heard:
	case <-time.After(5 * time.Second):
		t.Fatalf("with network host the UDP listener hears nothing: the control does not show the leak it guards")
	}

	name := sessionName(t)
	r := mosaic(t, "run", "--name", name, "--workspace", workspace(t),
		"--allow-host", "testhost.mosaic.test:5432", "--allow-host", "testhost.mosaic.test", "--allow-host", n+".0/24",
		"--", "bash", "-c", tunScript, "bash", n)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		k, v, _ := strings.Cut(l, " ")
		lines[k] = v
	}
	for k, want := range map[string]string{
		"port5432":    "ok hello from testhost 5432",
		"port443":     "ok hello from testhost",
		"other":       "refused",
		"literal":     "refused",
		"dns-allowed": "ok 240.",
		"dns-refused": "refused",
		"caps":        "ok",
	} {
		if !strings.HasPrefix(lines[k], want) {
			t.Errorf("%s: %q, want %q\n%s%s", k, lines[k], want, r.stdout, r.stderr)
		}
	}
	for _, k := range []string{"other", "literal", "dns-refused"} {
		if ms := strings.TrimSuffix(lines[k][strings.LastIndex(lines[k], " ")+1:], "ms"); len(ms) > 4 {
			t.Errorf("%s took %sms: a refusal must come at once, not after a timeout", k, ms)
		}
	}
	select {
	case m := <-heard:
		t.Errorf("the session's UDP reached the test network: %q", m)
	case <-time.After(time.Second):
	}
	for _, want := range []string{
		"refused otherhost.mosaic.test", "mosaic allow " + name + " otherhost.mosaic.test",
		"refused " + n + ".3:443",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("run's end lines lack %q:\n%s", want, r.stderr)
		}
	}
}

// TestEveryConnectionAllowedLive: a client that ignores the proxy variables
// is refused a host, which `mosaic allow` then grants while the session
// runs, and the same client reaches it, no restart.
func TestEveryConnectionAllowedLive(t *testing.T) {
	n := needTestNet(t)
	ws := workspace(t)
	name := sessionName(t)
	script := `
try() { if timeout 8 bash -c 'exec 3<>/dev/tcp/otherhost.mosaic.test/443 && head -1 <&3' >.try 2>&1; then :; else echo refused >.try; fi; mv .try "$1"; }
try before
while [ ! -e granted ]; do sleep 0.1; done
try after
sleep 300`
	mustMosaic(t, "start", "--direct", "--name", name, "--workspace", ws, "--allow-host", n+".0/24", "--", "bash", "-c", script)
	defer mosaic(t, "stop", name)
	eventually(t, 15*time.Second, "the first try", func() bool { _, err := os.Stat(filepath.Join(ws, "before")); return err == nil })
	if b, _ := os.ReadFile(filepath.Join(ws, "before")); strings.TrimSpace(string(b)) != "refused" {
		t.Fatalf("before the grant: %q, want refused", b)
	}
	if st := mustMosaic(t, "status", "--json", name).stdout; !strings.Contains(st, "otherhost.mosaic.test") {
		t.Errorf("status does not show the refusal:\n%s", st)
	}
	mustMosaic(t, "allow", name, "otherhost.mosaic.test")
	if err := os.WriteFile(filepath.Join(ws, "granted"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var after []byte
	eventually(t, 15*time.Second, "the try after the grant", func() bool {
		after, _ = os.ReadFile(filepath.Join(ws, "after"))
		return len(after) > 0
	})
	if !strings.Contains(string(after), "hello from otherhost") {
		t.Errorf("after the grant: %q, want otherhost's line", after)
	}
}

// TestShimDropsTheDeviceCapabilities: the unit gives the exec shim
// CAP_NET_ADMIN and CAP_NET_BIND_SERVICE to make the network device (its
// AmbientCapabilities show them); no process of the session holds one once
// it runs, bwrap's monitor outside the sandbox included. (A shim that kept
// them fails every start: bwrap refuses to run with capabilities it was
// not given as setuid, "Unexpected capabilities but not setuid".)
func TestShimDropsTheDeviceCapabilities(t *testing.T) {
	n := needTestNet(t)
	name := sessionName(t)
	mustMosaic(t, "start", "--name", name, "--workspace", workspace(t), "--allow-host", "testhost.mosaic.test", "--allow-host", n+".0/24", "--", "sleep", "300")
	defer mosaic(t, "stop", name)
	if c := unitProperty(t, "mosaic-"+name+".service", "AmbientCapabilities"); !strings.Contains(c, "cap_net_admin") || !strings.Contains(c, "cap_net_bind_service") {
		t.Fatalf("the unit's AmbientCapabilities are %q: the test does not see the capabilities it checks are dropped", c)
	}
	pids := unitPIDs(t, "mosaic-"+name+".service")
	if len(pids) < 2 {
		t.Fatalf("the session's unit has processes %v, want bwrap's and the init's at least", pids)
	}
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(l, ":")
			if (k == "CapEff" || k == "CapPrm" || k == "CapAmb" || k == "CapInh") && strings.TrimSpace(v) != "0000000000000000" {
				t.Errorf("process %s of the session holds capabilities: %s", pid, l)
			}
		}
	}
}

// TestAskHoldsUntilAnswered (issue 39's hold and ask): with --ask, a
// connection to a host not on the list (a client that ignores the proxy
// variables, through the network device) is held, not refused: `mosaic
// approve --json` lists it, `mosaic allow` lets it go on; another, held,
// `mosaic deny` refuses. Without --ask the same connection is refused at
// once (the control). --ask without network allow is bad input.
func TestAskHoldsUntilAnswered(t *testing.T) {
	n := needTestNet(t)
	try := `s=$(date +%s%N); if timeout 40 bash -c "exec 3<>/dev/tcp/$1/443 && head -1 <&3" >.try$2 2>&1; then :; else echo refused >>.try$2; fi; echo "took $(( ($(date +%s%N) - s) / 1000000 ))ms" >>.try$2; mv .try$2 "$2"`
	script := try + "\n"
	ws := workspace(t)
	name := sessionName(t)
	r := mosaic(t, "run", "--direct", "--name", name, "--workspace", ws, "--allow-host", n+".0/24", "--", "bash", "-c", script, "bash", "otherhost.mosaic.test", "first")
	if b, _ := os.ReadFile(filepath.Join(ws, "first")); r.code != 0 || !strings.Contains(string(b), "refused") || !regexp.MustCompile(`took \d{1,3}ms`).Match(b) {
		t.Fatalf("without --ask, a host off the list is refused at once: exit %d, %q\n%s", r.code, b, r.stderr)
	}

	name = sessionName(t)
	both := "(" + try + `) & (` + strings.ReplaceAll(strings.ReplaceAll(try, "$1", "$3"), "$2", "$4") + `) & wait; sleep 300`
	mustMosaic(t, "start", "--direct", "--ask", "--name", name, "--workspace", ws, "--allow-host", n+".0/24", "--", "bash", "-c", both, "bash", "otherhost.mosaic.test", "allowed", "testhost.mosaic.test", "denied")
	defer mosaic(t, "stop", name)
	var listed string
	for i := 0; ; i++ {
		listed = mustMosaic(t, "approve", "--json").stdout
		if strings.Contains(listed, `"session": "`+name+`"`) && strings.Contains(listed, "otherhost.mosaic.test:443") && strings.Contains(listed, "testhost.mosaic.test:443") {
			break
		}
		if i == 100 {
			st := mosaic(t, "status", name)
			t.Fatalf("approve does not list both held connections: %s\nstatus:\n%s%s", listed, st.stdout, st.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st := mustMosaic(t, "status", name).stdout; !strings.Contains(st, "HELD for your answer: otherhost.mosaic.test:443") {
		t.Errorf("status does not show the held connection:\n%s", st)
	}
	mustMosaic(t, "allow", name, "otherhost.mosaic.test")
	mustMosaic(t, "deny", name, "testhost.mosaic.test")
	var allowed, denied []byte
	eventually(t, 15*time.Second, "both answers", func() bool {
		allowed, _ = os.ReadFile(filepath.Join(ws, "allowed"))
		denied, _ = os.ReadFile(filepath.Join(ws, "denied"))
		return len(allowed) > 0 && len(denied) > 0
	})
	if !strings.Contains(string(allowed), "hello from otherhost") {
		t.Errorf("held, then allowed: %q", allowed)
	}
	if !strings.Contains(string(denied), "refused") {
		t.Errorf("held, then denied: %q", denied)
	}
	// allow --once: the held connection goes on, the next is held again.
	name = sessionName(t)
	twice := try + "\n" + strings.ReplaceAll(try, "$2", "$3") + "\nsleep 300"
	mustMosaic(t, "start", "--direct", "--ask", "--name", name, "--workspace", ws, "--allow-host", n+".0/24", "--", "bash", "-c", twice, "bash", "otherhost.mosaic.test", "once", "again")
	defer mosaic(t, "stop", name)
	heldFor := func() bool {
		return strings.Contains(mustMosaic(t, "approve", "--json").stdout, `"session": "`+name+`"`)
	}
	eventually(t, 20*time.Second, "the first connection held", heldFor)
	if r := mosaic(t, "allow", "--once", "--for", "1h", name, "otherhost.mosaic.test"); r.code != 2 {
		t.Errorf("allow --once --for: exit %d, want 2", r.code)
	}
	mustMosaic(t, "allow", "--once", name, "otherhost.mosaic.test")
	eventually(t, 15*time.Second, "the first answer", func() bool { b, _ := os.ReadFile(filepath.Join(ws, "once")); return len(b) > 0 })
	if b, _ := os.ReadFile(filepath.Join(ws, "once")); !strings.Contains(string(b), "hello from otherhost") {
		t.Errorf("held, then let through once: %q", b)
	}
	eventually(t, 20*time.Second, "the next connection held again", heldFor)
	mustMosaic(t, "deny", name, "otherhost.mosaic.test")
	eventually(t, 15*time.Second, "the second answer", func() bool { b, _ := os.ReadFile(filepath.Join(ws, "again")); return len(b) > 0 })
	if b, _ := os.ReadFile(filepath.Join(ws, "again")); !strings.Contains(string(b), "refused") {
		t.Errorf("after a once, the next connection: %q", b)
	}
	if r := mosaic(t, "allow", "--once", name, "otherhost.mosaic.test"); r.code != 2 || !strings.Contains(r.stderr, "holds no connection") {
		t.Errorf("allow --once with nothing held: exit %d %s", r.code, r.stderr)
	}
	if r := mosaic(t, "run", "--ask", "--network", "none", "--workspace", ws, "--", "true"); r.code != 2 {
		t.Errorf("--ask with --network none: exit %d, want 2 (bad input)\n%s", r.code, r.stderr)
	}
}
