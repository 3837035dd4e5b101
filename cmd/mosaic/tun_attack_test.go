package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// reuseScript connects three times in a row from one source port to
// mockhost's PORT, each time reading to the server's end before closing
// (so that the server's side closes first, as an HTTP/1.0 or line server
// does), and prints "reuse ok" or what failed.
const reuseScript = `
import socket, sys, random
port = int(sys.argv[1]); src = random.randrange(40000, 50000)
for i in range(3):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.settimeout(4)
    try:
        s.bind(("0.0.0.0", src)); s.connect(("mockhost.mosaic.test", port))
        while s.recv(100): pass
    except Exception as e:
        print("reuse failed at connection %d from port %d: %r" % (i + 1, src, e)); sys.exit(0)
    s.close()
print("reuse ok")
`

// TestTUNAttackSourcePortReuse: a connection from a source port that
// ended a moment before is one a session's client makes in the normal
// course (the kernel picks ephemeral ports, and a busy client reuses one
// within a minute: 2 of 2,000 sequential connections to one host:port
// timed out this way); the session's network stack, the active closer
// when the server ends first, held each ended connection in TIME-WAIT for
// gVisor's default 60 s, during which it dropped the new SYN on the same
// four-tuple (gVisor hands such a SYN only to a listening endpoint, and
// the forwarder is none), so the connection hung until the client gave up.
// Shown first with network host, where the kernel takes the new SYN; the
// session's failed (connection 2 timed out) before its stack's TIME-WAIT
// was shortened.
func TestTUNAttackSourcePortReuse(t *testing.T) {
	n := needTestNet(t)
	l := listenMock(t, n)
	go serve(l, "hello from mock")
	_, port, _ := net.SplitHostPort(l.Addr().String())
	for _, network := range [][]string{{"host"}, {"allow", "--allow-host", "mockhost.mosaic.test:" + port, "--allow-host", n + ".0/24"}} {
		args := append([]string{"run", "--workspace", workspace(t), "--network"}, network...)
		r := mosaic(t, append(args, "--", "/usr/bin/python3", "-c", reuseScript, port)...)
		if strings.TrimSpace(r.stdout) != "reuse ok" {
			t.Errorf("network %s: %s%s", network[0], r.stdout, r.stderr)
		}
	}
}

// busyScript holds every connection slot of the session's egress proxy
// (256 connections to its socket that send nothing, each held for the
// proxy's head timeout) and asks the session's DNS for an allowed name:
// it prints the answer's RCODE, then the same once the slots are free.
const busyScript = `
import socket, struct
def rcode(name):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(8)
    s.sendto(struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1), ("127.0.0.53", 53))
    return s.recv(512)[3] & 15
held = []
for i in range(256):
    u = socket.socket(socket.AF_UNIX); u.connect("/run/mosaic/egress/proxy.sock"); held.append(u)
print("busy", rcode("testhost.mosaic.test"))
for u in held: u.close()
print("free", rcode("testhost.mosaic.test"))
`

// TestTUNAttackBusyProxyIsNoNXDOMAIN: when the session's DNS cannot get
// an answer from the proxy (its connections all taken, here by the
// session itself; the proxy restarting; a timeout), an allowed name must
// not be answered NXDOMAIN, which says the name does not exist (getaddrinfo's
// "Name or service not known", cached by resolvers as an answer) and which
// a session could thus plant for names it did not choose: SERVFAIL (2), a
// failure to retry. Before the fix the busy answer was 3.
func TestTUNAttackBusyProxyIsNoNXDOMAIN(t *testing.T) {
	needTestNet(t)
	r := mosaic(t, "run", "--workspace", workspace(t), "--allow-host", "testhost.mosaic.test",
		"--", "/usr/bin/python3", "-c", busyScript)
	if got := strings.Fields(r.stdout); len(got) != 4 || got[1] != "2" || got[3] != "0" {
		t.Errorf("RCODEs with the proxy busy, then free: %q, want busy 2 (SERVFAIL), free 0\n%s", r.stdout, r.stderr)
	}
}

// v6Script connects over IPv6 to a link-local address through the
// session's device and to a global one, printing how each failed and in
// how many seconds.
const v6Script = `
import socket, time
for host in ("fe80::1%mosaic0", "2001:db8::1"):
    a = socket.getaddrinfo(host, 443, socket.AF_INET6, socket.SOCK_STREAM)[0][4]
    s = socket.socket(socket.AF_INET6); s.settimeout(5); t0 = time.time()
    try: s.connect(a); r = "connected"
    except Exception as e: r = type(e).__name__
    print(host, r, "%.1f" % (time.time() - t0))
`

// TestTUNAttackIPv6FailsAtOnce: the session has no IPv6 out (its stack
// speaks IPv4), and a connection over IPv6 must fail at once, as one with
// no route does, not hang: the kernel gave the device a link-local
// address and the route fe80::/64 when it came up, and a connection to a
// link-local address through it hung until the client's timeout (5 s
// here) before the device was made without IPv6 (checked with the build
// before the fix).
func TestTUNAttackIPv6FailsAtOnce(t *testing.T) {
	needTestNet(t)
	r := mosaic(t, "run", "--workspace", workspace(t), "--allow-host", "testhost.mosaic.test",
		"--", "/usr/bin/python3", "-c", v6Script)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if secs, err := strconv.ParseFloat(f[len(f)-1], 64); len(f) != 3 || f[1] == "connected" || f[1] == "TimeoutError" || err != nil || secs > 1 {
			t.Errorf("%s: want a failure at once", l)
		}
	}
}

// listenMock listens on mockhost.mosaic.test (N.1, the host's end of the
// test network) on a free port, until the test ends.
func listenMock(t *testing.T, n string) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", n+".1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// ownNamesScript asks the session's DNS, on its loopback stub and through
// the device, for names of the session's own, printing each answer's
// address or its RCODE.
const ownNamesScript = `
import socket, struct
def q(name, server):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(8)
    s.sendto(struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1), (server, 53))
    r = s.recv(512)
    return ".".join(str(b) for b in r[-4:]) if struct.unpack(">H", r[6:8])[0] else "rcode=%d" % (r[3] & 15)
for server in ("127.0.0.53", "192.0.2.53"):
    print(server, q("localhost", server), q("db.localhost", server), q(socket.gethostname(), server))
`

// TestTUNAttackOwnNames: a resolver that skips /etc/hosts (dig, a DNS
// library, a JVM's own) asks the session's DNS for localhost or the
// session's own host name; they were refused (NXDOMAIN) and each recorded
// as a refusal, which run printed with the line that grants it, "mosaic
// allow S localhost", which mosaic refuses (a loopback entry needs its
// port). They are answered as the session's hosts file answers them, and
// nothing is recorded (before the fix: rcode=3 and "refused localhost").
func TestTUNAttackOwnNames(t *testing.T) {
	needTestNet(t)
	name := sessionName(t)
	r := mosaic(t, "run", "--name", name, "--workspace", workspace(t), "--allow-host", "testhost.mosaic.test",
		"--", "/usr/bin/python3", "-c", ownNamesScript)
	for _, server := range []string{"127.0.0.53", "192.0.2.53"} {
		if want := server + " 127.0.0.1 127.0.0.1 127.0.1.1"; !strings.Contains(r.stdout, want) {
			t.Errorf("want %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "refused") {
		t.Errorf("the session's own names were recorded as refusals:\n%s", r.stderr)
	}
}

// revokeScript connects to the addresses the session's DNS gave testhost
// and otherhost, before and after the test takes each away (a deny of
// the first, the end of a 3 s grant of the second), each try's outcome in
// a file of the workspace.
const revokeScript = `
try() { if timeout 5 bash -c "exec 3<>/dev/tcp/$2/443 && head -1 <&3" >.t 2>&1; then :; else echo refused >.t; fi; mv .t "$1"; }
a=$(getent hosts testhost.mosaic.test | cut -d' ' -f1)
try deny-before "$a"
while [ ! -e denied ]; do sleep 0.1; done
try deny-after "$a"
getent hosts testhost.mosaic.test >.t || echo nxdomain >.t; mv .t deny-dns
while [ ! -e granted ]; do sleep 0.1; done
b=$(getent hosts otherhost.mosaic.test | cut -d' ' -f1)
try grant-before "$b"
while [ ! -e expired ]; do sleep 0.1; done
try grant-after "$b"
sleep 300
`

// TestTUNAttackRevokedAddress: an address the session's DNS handed out
// for a name does not outlive the name's grant: after a deny, and after a
// grant's end, a connection to the address handed out before is refused
// (the proxy checks each connection's name), and the name no longer
// resolves. (Held: the control is the same address reached before each
// revocation.)
func TestTUNAttackRevokedAddress(t *testing.T) {
	n := needTestNet(t)
	ws := workspace(t)
	name := sessionName(t)
	mustMosaic(t, "start", "--direct", "--name", name, "--workspace", ws, "--allow-host", "testhost.mosaic.test", "--allow-host", n+".0/24",
		"--", "bash", "-c", revokeScript)
	defer mosaic(t, "stop", name)
	read := func(f string) string {
		var b []byte
		eventually(t, 20*time.Second, f, func() bool { var err error; b, err = os.ReadFile(filepath.Join(ws, f)); return err == nil })
		return strings.TrimSpace(string(b))
	}
	touch := func(f string) { must(t, os.WriteFile(filepath.Join(ws, f), nil, 0o644)) }
	if got := read("deny-before"); got != "hello from testhost" {
		t.Fatalf("before the deny: %q", got)
	}
	mustMosaic(t, "deny", name, "testhost.mosaic.test")
	touch("denied")
	if got := read("deny-after"); got != "refused" {
		t.Errorf("the address handed out before the deny: %q, want refused", got)
	}
	if got := read("deny-dns"); got != "nxdomain" {
		t.Errorf("the denied name still resolves: %q", got)
	}
	mustMosaic(t, "allow", name, "otherhost.mosaic.test", "--for", "3s")
	touch("granted")
	if got := read("grant-before"); got != "hello from otherhost" {
		t.Fatalf("during the grant: %q", got)
	}
	time.Sleep(3500 * time.Millisecond)
	touch("expired")
	if got := read("grant-after"); got != "refused" {
		t.Errorf("the address handed out during a grant that ended: %q, want refused", got)
	}
}

// TestTUNAttackSSHToGrantedHost: as a user, git over ssh (a client that
// knows no proxy) to a test sshd on mockhost works once its port is
// granted, and is refused before. The sshd runs as the test user on the
// host's end of the test network, serving a bare repository of the test's.
func TestTUNAttackSSHToGrantedHost(t *testing.T) {
	n := needTestNet(t)
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		t.Skip("needs /usr/sbin/sshd")
	}
	ws := workspace(t)
	keys := filepath.Join(ws, "keys")
	must(t, os.Mkdir(keys, 0o700))
	for _, k := range []string{"host_key", "user_key"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(keys, k)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	pub, _ := os.ReadFile(filepath.Join(keys, "user_key.pub"))
	hostPub, _ := os.ReadFile(filepath.Join(keys, "host_key.pub"))
	must(t, os.WriteFile(filepath.Join(keys, "authorized_keys"), pub, 0o600))
	repo := filepath.Join(t.TempDir(), "repo.git")
	if out, err := exec.Command("sh", "-c", "git init -q -b main "+repo+".src && git -C "+repo+".src -c user.name=t -c user.email=t@t commit -q --allow-empty -m one && git clone -q --bare "+repo+".src "+repo).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	l := listenMock(t, n)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	cfg := fmt.Sprintf("ListenAddress %s.1:%s\nHostKey %s/host_key\nAuthorizedKeysFile %s/authorized_keys\nPidFile none\nUsePAM no\nStrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n", n, port, keys, keys)
	must(t, os.WriteFile(filepath.Join(keys, "sshd_config"), []byte(cfg), 0o600))
	sshd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", filepath.Join(keys, "sshd_config"))
	if err := sshd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sshd.Process.Kill(); sshd.Wait() }()
	eventually(t, 10*time.Second, "sshd listening", func() bool {
		c, err := net.Dial("tcp", n+".1:"+port)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	must(t, os.WriteFile(filepath.Join(keys, "known_hosts"), []byte("[mockhost.mosaic.test]:"+port+" "+string(hostPub)), 0o600))
	ssh := fmt.Sprintf("ssh -i %s/user_key -o IdentitiesOnly=yes -o UserKnownHostsFile=%s/known_hosts -o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=5", keys, keys)
	script := "GIT_SSH_COMMAND='" + ssh + "' git ls-remote --symref ssh://" + os.Getenv("USER") + "@mockhost.mosaic.test:" + port + repo
	for _, grant := range []bool{false, true} {
		args := []string{"run", "--direct", "--workspace", ws, "--allow-host", "testhost.mosaic.test", "--allow-host", n + ".0/24"}
		if grant {
			args = append(args, "--allow-host", "mockhost.mosaic.test:"+port)
		}
		r := mosaic(t, append(args, "--", "bash", "-c", script)...)
		if ok := r.code == 0 && strings.Contains(r.stdout, "ref: refs/heads/main"); ok != grant {
			t.Errorf("granted %v: exit %d\n%s%s", grant, r.code, r.stdout, r.stderr)
		}
	}
}

// TestTUNAttackCurlBothWays: as a user, curl over TLS (its certificate
// checked, SNI and all) reaches an allowed HTTPS host both ways: with
// --noproxy '*' through the session's device, and through the proxy
// variables; a host not allowed is refused both ways.
func TestTUNAttackCurlBothWays(t *testing.T) {
	n := needTestNet(t)
	caPEM, cert := testCA(t, "mockhost.mosaic.test")
	l := listenMock(t, n)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls hello") })}
	go srv.Serve(tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	ws := workspace(t)
	must(t, os.WriteFile(filepath.Join(ws, "ca.pem"), caPEM, 0o644))
	script := `for u in https://mockhost.mosaic.test:$1/ https://otherhost.mosaic.test/; do
	for p in "--noproxy *" ""; do echo "$u [$p] $(curl -sS --max-time 8 --cacert ca.pem $p "$u" 2>/dev/null || echo failed)"; done
done`
	r := mosaic(t, "run", "--workspace", ws, "--allow-host", "mockhost.mosaic.test:"+port, "--allow-host", n+".0/24",
		"--", "bash", "-c", script, "bash", port)
	for _, want := range []string{
		"https://mockhost.mosaic.test:" + port + "/ [--noproxy *] tls hello",
		"https://mockhost.mosaic.test:" + port + "/ [] tls hello",
		"https://otherhost.mosaic.test/ [--noproxy *] failed",
		"https://otherhost.mosaic.test/ [] failed",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("want %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
}

// fdScript lists the descriptors the command inherited beyond stdin,
// stdout and stderr, writes to each that is an eventfd (as the command
// could, to the one gVisor's device reader polls to know when to stop),
// then connects to an allowed host through the device.
const fdScript = `
import os, socket
fds = []
for f in os.listdir("/proc/self/fd"):
    try: fds.append((int(f), os.readlink("/proc/self/fd/" + f)))
    except OSError: pass
extra = [(f, l) for f, l in fds if f > 2]
print("extra", extra)
for f, l in extra:
    if "eventfd" in l: os.write(f, (1).to_bytes(8, "little"))
try:
    s = socket.create_connection(("testhost.mosaic.test", 5432), timeout=5); s.settimeout(5); print("after", s.recv(100).decode().strip())
except Exception as e: print("after", type(e).__name__)
`

// TestTUNAttackNoInheritedDescriptor: the command inherits no descriptor
// of the init's. gVisor's device reader makes its stop eventfd without
// O_CLOEXEC, and the command got it (fd 9): one write to it stopped the
// reading of the session's network device for good, every connection of
// the session through it dead until the session's end (before the fix:
// "extra [(9, 'anon_inode:[eventfd]')]" and "after TimeoutError").
func TestTUNAttackNoInheritedDescriptor(t *testing.T) {
	n := needTestNet(t)
	r := mosaic(t, "run", "--workspace", workspace(t), "--allow-host", "testhost.mosaic.test:5432", "--allow-host", n+".0/24",
		"--", "/usr/bin/python3", "-c", fdScript)
	if !strings.Contains(r.stdout, "extra []") || !strings.Contains(r.stdout, "after hello from testhost 5432") {
		t.Errorf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// reconfigureScript tries to take the session's network device down or
// route around it, as the command and as root of a user namespace of its
// own (which a session may make), then connects through the device.
const reconfigureScript = `
for c in "ip link set mosaic0 down" "ip route replace default dev lo" "ip addr add 10.9.9.9/32 dev mosaic0" \
	"unshare -Ur ip link set mosaic0 down" "unshare -Ur ip route replace default dev lo"; do
	if $c 2>/dev/null; then echo "done: $c"; else echo "refused: $c"; fi
done
exec 3<>/dev/tcp/testhost.mosaic.test/5432 && head -1 <&3
`

// TestTUNAttackNoWayToReconfigure: the command cannot take the device
// down nor change the namespace's routes, not even as root of a user
// namespace of its own (the network namespace belongs to the unit's, an
// ancestor of it): each is refused and the device still carries a
// connection after. (Held; the control is the same connection working
// after the tries, and TestShimDropsTheDeviceCapabilities shows the
// capabilities dropped.)
func TestTUNAttackNoWayToReconfigure(t *testing.T) {
	n := needTestNet(t)
	r := mosaic(t, "run", "--workspace", workspace(t), "--allow-host", "testhost.mosaic.test:5432", "--allow-host", n+".0/24",
		"--", "bash", "-c", reconfigureScript)
	if strings.Contains(r.stdout, "done:") || strings.Count(r.stdout, "refused:") != 5 || !strings.Contains(r.stdout, "hello from testhost 5432") {
		t.Errorf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestTUNAttackAskAnsweredLate: with --ask the proxy holds a connection to
// a host off the list for 30 s while the user decides; through the
// network device the init gave up on the proxy's answer after 15 s and
// reset the client's connection, so that an answer in the second half of
// the hold reached no one (before the fix: "refused" after 15 s).
func TestTUNAttackAskAnsweredLate(t *testing.T) {
	n := needTestNet(t)
	ws := workspace(t)
	name := sessionName(t)
	script := `if timeout 45 bash -c "exec 3<>/dev/tcp/otherhost.mosaic.test/443 && head -1 <&3" >.t 2>&1; then :; else echo refused >>.t; fi; mv .t late; sleep 300`
	mustMosaic(t, "start", "--direct", "--ask", "--name", name, "--workspace", ws, "--allow-host", n+".0/24", "--", "bash", "-c", script)
	defer mosaic(t, "stop", name)
	eventually(t, 15*time.Second, "the held connection", func() bool {
		return strings.Contains(mustMosaic(t, "approve", "--json").stdout, "otherhost.mosaic.test:443")
	})
	time.Sleep(18 * time.Second)
	mustMosaic(t, "allow", name, "otherhost.mosaic.test")
	var late []byte
	eventually(t, 20*time.Second, "the late answer's outcome", func() bool {
		late, _ = os.ReadFile(filepath.Join(ws, "late"))
		return len(late) > 0
	})
	if !strings.Contains(string(late), "hello from otherhost") {
		t.Errorf("held, then allowed 18 s in: %q", late)
	}
}

// namesScript asks the session's DNS for 70,000 names of its own making
// (with --ask every name gets an address), then for an allowed name not
// asked before, printing that answer.
const namesScript = `
import socket, struct
def pkt(i, name):
    return struct.pack(">HHHHHH", i & 0xffff, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(10)
answered = 0
for start in range(0, 70000, 200):
    for i in range(start, start + 200): s.sendto(pkt(i, "n%d.flood.test" % i), ("127.0.0.53", 53))
    for i in range(200):
        try: s.recv(512); answered += 1
        except socket.timeout: break
r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); r.settimeout(10)
r.sendto(pkt(1, "testhost.mosaic.test"), ("127.0.0.53", 53)); a = r.recv(512)
print("flood", answered, "then", ".".join(str(b) for b in a[-4:]) if struct.unpack(">H", a[6:8])[0] else "rcode=%d" % (a[3] & 15))
`

// TestTUNAttackNameTableFull: the session's DNS keeps the names it gave
// addresses to in a table of at most 65,536; full, it refused every new
// name (SERVFAIL) for the rest of the session. With --ask every name
// resolves, so a session filled it with names of its own making, after
// which no new name, allowed or not, resolved again (before the fix:
// "then rcode=2"). The oldest are forgotten now, their addresses not given
// again.
func TestTUNAttackNameTableFull(t *testing.T) {
	needTestNet(t)
	r := mosaic(t, "run", "--ask", "--workspace", workspace(t), "--allow-host", "testhost.mosaic.test",
		"--", "/usr/bin/python3", "-c", namesScript)
	if !regexp.MustCompile(`then 240\.\d+\.\d+\.\d+`).MatchString(r.stdout) {
		t.Errorf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}
