package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Issue 29: package registries as host groups, grants to a running
// session, refusals in sight. The registries are stood in for on the rig's
// test network: contrib/rig.sh maps registry.npmjs.org, pypi.org,
// files.pythonhosted.org and deb.debian.org to its test host N.4, which
// forwards 443 and 80 to registryTLSPort and registryHTTPPort here on N.1.
const (
	registryTLSPort  = "8443"
	registryHTTPPort = "8080"
)

// registry stands in for npm's registry, PyPI (index and file host) and a
// Debian mirror: a tiny package of each, a ping, and a slow stream.
type registry struct {
	caPEM []byte
	mu    sync.Mutex
	got   []string // "METHOD host path" of every request
	slow  chan struct{}
}

func (r *registry) requests() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.got, "\n")
}

// testCAFor makes a CA and one server certificate for names; it returns
// the CA's PEM and the server's tls.Certificate.
func testCAFor(t *testing.T, names ...string) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mosaic test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(2 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ = x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(2 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func npmTarball(t *testing.T) []byte {
	var tgz bytes.Buffer
	gz := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(gz)
	for name, body := range map[string]string{
		"package/package.json": `{"name":"mosaic-tiny","version":"1.0.0","main":"index.js"}`,
		"package/index.js":     `module.exports = "tiny from the stand-in registry";`,
	} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(1e9, 0), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return tgz.Bytes()
}

func pyWheel(t *testing.T) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	files := []struct{ name, body string }{
		{"mosaic_tiny/__init__.py", "TINY = 'from the stand-in index'\n"},
		{"mosaic_tiny-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: mosaic-tiny\nVersion: 1.0\n"},
		{"mosaic_tiny-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: mosaic-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, f := range files {
		w, _ := zw.Create(f.name)
		io.WriteString(w, f.body)
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString("mosaic_tiny-1.0.dist-info/RECORD,,\n")
	w, _ := zw.Create("mosaic_tiny-1.0.dist-info/RECORD")
	io.WriteString(w, record.String())
	zw.Close()
	return b.Bytes()
}

func startRegistry(t *testing.T, n string) *registry {
	t.Helper()
	caPEM, cert := testCAFor(t, "registry.npmjs.org", "pypi.org", "files.pythonhosted.org", "deb.debian.org")
	r := &registry{caPEM: caPEM, slow: make(chan struct{})}
	tgz, whl := npmTarball(t), pyWheel(t)
	sha1sum, sha512sum, whlSum := sha1.Sum(tgz), sha512.Sum512(tgz), sha256.Sum256(whl)
	doc, _ := json.Marshal(map[string]any{"name": "mosaic-tiny", "dist-tags": map[string]string{"latest": "1.0.0"},
		"versions": map[string]any{"1.0.0": map[string]any{"name": "mosaic-tiny", "version": "1.0.0", "dist": map[string]string{
			"tarball":   "https://registry.npmjs.org/mosaic-tiny/-/mosaic-tiny-1.0.0.tgz",
			"shasum":    hex.EncodeToString(sha1sum[:]),
			"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sha512sum[:]),
		}}}})
	whlName := "mosaic_tiny-1.0-py3-none-any.whl"
	index := `<!DOCTYPE html><html><body><a href="https://files.pythonhosted.org/packages/ab/cd/` + whlName + `#sha256=` +
		hex.EncodeToString(whlSum[:]) + `">` + whlName + `</a></body></html>`
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		host, _, _ := net.SplitHostPort(req.Host)
		if host == "" {
			host = req.Host
		}
		r.mu.Lock()
		r.got = append(r.got, req.Method+" "+host+" "+req.URL.Path)
		r.mu.Unlock()
		switch host + req.URL.Path {
		case "registry.npmjs.org/-/ping", "pypi.org/-/ping":
			io.WriteString(w, "pong from "+host+"\n")
		case "registry.npmjs.org/mosaic-tiny":
			w.Header().Set("Content-Type", "application/json")
			w.Write(doc)
		case "registry.npmjs.org/mosaic-tiny/-/mosaic-tiny-1.0.0.tgz":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(tgz)
		case "registry.npmjs.org/slow": // a stream that lasts until the test ends
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "tick %d\n", i); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.slow:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		case "pypi.org/simple/mosaic-tiny/":
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, index)
		case "files.pythonhosted.org/packages/ab/cd/" + whlName:
			w.Write(whl)
		case "deb.debian.org/debian/dists/stable/Release":
			io.WriteString(w, "Origin: Debian (the stand-in mirror)\n")
		default:
			http.NotFound(w, req)
		}
	})
	tl, err := tls.Listen("tcp", net.JoinHostPort(n+".1", registryTLSPort), &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatalf("the registry stand-in: %v", err)
	}
	pl, err := net.Listen("tcp", net.JoinHostPort(n+".1", registryHTTPPort))
	if err != nil {
		tl.Close()
		t.Fatalf("the mirror stand-in: %v", err)
	}
	srv := &http.Server{Handler: handler}
	go srv.Serve(tl)
	go srv.Serve(pl)
	t.Cleanup(func() { close(r.slow); srv.Close() })
	return r
}

// shellSession is a running session whose command runs the scripts the
// test drops into its workspace, one at a time, and leaves their output
// beside them: requests made from inside one session over time.
type shellSession struct {
	name, ws string
	n        int
}

const shellLoop = `
exec 3>&1 # the session's own output (the journal), for a script to write to
while :; do
  for f in req-*; do
    [ -e "$f" ] || continue
    n=${f#req-}
    bash "$f" >"out-$n.tmp" 2>&1
    mv "out-$n.tmp" "out-$n"
    rm -f "$f"
  done
  sleep 0.05
done`

func startShell(t *testing.T, bin string, args ...string) *shellSession {
	t.Helper()
	s := &shellSession{name: sessionName(t), ws: workspace(t)}
	argv := append([]string{"start", "--direct", "--name", s.name, "--workspace", s.ws}, args...) // the workspace is its mailbox
	argv = append(argv, "--", "bash", "-c", shellLoop)
	if r := mosaicAs(t, bin, argv...); r.code != 0 {
		t.Fatalf("start: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return s
}

// run runs script in the session and returns its output.
func (s *shellSession) run(t *testing.T, script string) string {
	t.Helper()
	s.n++
	n := strconv.Itoa(s.n)
	if err := os.WriteFile(filepath.Join(s.ws, ".req-"+n), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Rename(filepath.Join(s.ws, ".req-"+n), filepath.Join(s.ws, "req-"+n))
	var out []byte
	eventually(t, 60*time.Second, "the session to run script "+n, func() bool {
		var err error
		out, err = os.ReadFile(filepath.Join(s.ws, "out-"+n))
		return err == nil
	})
	return string(out)
}

// curl is a request from inside the session through its proxy, printing
// the HTTP status (000 when the proxy refused the tunnel) and the body.
func curl(args string) string {
	return `curl -sS --max-time 20 -w '\nstatus=%{http_code}\n' ` + args + " 2>&1; echo rc=$?\n"
}

// egressView is what the tests read of status --json's egress.
type egressView struct {
	Egress struct {
		Allow  []string
		Grants []struct {
			Entry, By string
			Until     *time.Time
		}
		Refused []struct {
			Target, Why, Detail string
			Count               int
		}
	}
}

func egressOf(t *testing.T, name string) egressView {
	t.Helper()
	return decode[egressView](t, mustMosaic(t, "status", "--json", name).stdout)
}

// TestLiveGrants: in one running session, a host off its list is refused
// with a body naming the session and the exact mosaic allow command, and
// shows in status with its count; mosaic allow makes the same request
// succeed without a restart; a grant --for 2s ends by itself; deny closes
// an open tunnel; the plain-HTTP mirror group gets GET and not POST; each
// grant and revocation is a journal line of the proxy (logs --egress).
func TestLiveGrants(t *testing.T) {
	n := needTestNet(t)
	reg := startRegistry(t, n)
	ca := filepath.Join(t.TempDir(), "registry-ca.pem")
	os.WriteFile(ca, reg.caPEM, 0o644)
	// The stand-ins live in a documentation range: named by address.
	s := startShell(t, mosaicBin, "--network", "allow", "--allow-host", n+".0/24", "--allow-host", "@debian", "--ca-file", ca)
	npmPing := curl("https://registry.npmjs.org/-/ping")

	// Refused, named, counted.
	out := s.run(t, npmPing+npmPing+`exec 3<>/dev/tcp/127.0.0.1/3128; printf 'CONNECT registry.npmjs.org:443 HTTP/1.1\r\nHost: registry.npmjs.org:443\r\n\r\n' >&3; timeout 5 cat <&3`)
	wantCmd := "mosaic allow " + s.name + " registry.npmjs.org)" // the port only when not 443
	if !strings.Contains(out, "status=000") || strings.Contains(out, "pong") || !strings.Contains(out, "403 Forbidden") ||
		!strings.Contains(out, "session "+s.name+": ") || !strings.Contains(out, wantCmd) {
		t.Fatalf("before the grant, want a 403 naming the session and %q:\n%s", wantCmd, out)
	}
	st := egressOf(t, s.name)
	found := false
	for _, r := range st.Egress.Refused {
		if r.Target == "registry.npmjs.org:443" && r.Why == "not-listed" && r.Count == 3 {
			found = true
		}
	}
	if !found {
		t.Errorf("status does not show registry.npmjs.org:443 refused 3 times as not-listed: %+v", st.Egress.Refused)
	}
	if text := mustMosaic(t, "status", s.name).stdout; !strings.Contains(text, "registry.npmjs.org:443  3×") || !strings.Contains(text, "not on the list") {
		t.Errorf("status text lacks the refusal:\n%s", text)
	}

	// Granted: the same request, the same session.
	if r := mustMosaic(t, "allow", s.name, "@npm"); !strings.Contains(r.stdout, "registry.npmjs.org:443") {
		t.Errorf("allow said: %s", r.stdout)
	}
	if out := s.run(t, npmPing); !strings.Contains(out, "pong from registry.npmjs.org") {
		t.Fatalf("after mosaic allow @npm:\n%s", out)
	}

	// --for 2s ends by itself.
	pypiPing := curl("https://pypi.org/-/ping")
	mustMosaic(t, "allow", "--for", "2s", s.name, "pypi.org")
	if out := s.run(t, pypiPing); !strings.Contains(out, "pong from pypi.org") {
		t.Fatalf("with a 2s grant:\n%s", out)
	}
	st = egressOf(t, s.name)
	if len(st.Egress.Grants) != 2 || st.Egress.Grants[1].Entry != "pypi.org:443" || st.Egress.Grants[1].Until == nil || !strings.HasPrefix(st.Egress.Grants[0].By, "uid ") {
		t.Errorf("status grants: %+v", st.Egress.Grants)
	}
	eventually(t, 10*time.Second, "the 2s grant to end", func() bool { return len(egressOf(t, s.name).Egress.Grants) == 1 })
	if out := s.run(t, pypiPing); strings.Contains(out, "pong") || !strings.Contains(out, "status=000") {
		t.Errorf("after the grant ended:\n%s", out)
	}

	// deny closes an open tunnel.
	s.run(t, `(curl -sS -N --max-time 60 https://registry.npmjs.org/slow >slow.out 2>&1; echo "rc=$?" >>slow.out) & echo started`)
	eventually(t, 20*time.Second, "the slow stream to flow", func() bool {
		b, _ := os.ReadFile(filepath.Join(s.ws, "slow.out"))
		return strings.Contains(string(b), "tick 2")
	})
	if r := mustMosaic(t, "deny", "--json", s.name, "@npm"); !strings.Contains(r.stdout, `"closed_connections": 1`) {
		t.Errorf("deny: %s", r.stdout)
	}
	eventually(t, 10*time.Second, "the open tunnel to close", func() bool {
		b, _ := os.ReadFile(filepath.Join(s.ws, "slow.out"))
		return strings.Contains(string(b), "rc=")
	})
	if b, _ := os.ReadFile(filepath.Join(s.ws, "slow.out")); strings.Contains(string(b), "rc=0") {
		t.Errorf("the stream ended as if complete: %s", b)
	}
	if out := s.run(t, npmPing); strings.Contains(out, "pong") {
		t.Errorf("after deny:\n%s", out)
	}

	// The mirror group: plain HTTP GET works, POST is refused before the mirror.
	out = s.run(t, curl("http://deb.debian.org/debian/dists/stable/Release")+curl("-X POST -d x=1 http://deb.debian.org/debian/dists/stable/Release"))
	if !strings.Contains(out, "Origin: Debian (the stand-in mirror)") || !strings.Contains(out, "status=200") || !strings.Contains(out, "status=403") ||
		!strings.Contains(out, "GET and HEAD") {
		t.Errorf("plain HTTP to the mirror, GET then POST:\n%s", out)
	}
	if strings.Contains(reg.requests(), "POST deb.debian.org") {
		t.Errorf("a POST reached the mirror:\n%s", reg.requests())
	}

	// The journal: one line per grant, expiry and revocation, the proxy's only.
	var logs string
	eventually(t, 10*time.Second, "the proxy's grant lines in the journal", func() bool {
		logs = mosaic(t, "logs", s.name, "--egress").stdout
		return strings.Contains(logs, "revoked @npm")
	})
	for _, want := range []string{
		"session " + s.name + ": grant @npm (registry.npmjs.org:443, registry.yarnpkg.com:443) by uid ",
		"session " + s.name + ": grant pypi.org:443 by uid ",
		"session " + s.name + ": grant pypi.org:443 expired",
		"session " + s.name + ": revoked @npm by uid ",
		"1 open connections closed",
		"session " + s.name + ": refused CONNECT registry.npmjs.org:443",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs --egress lacks %q:\n%s", want, logs)
		}
	}
	// A grant ends with its session: a new session of the name has none.
	mustMosaic(t, "allow", s.name, "@go")
	mustMosaic(t, "stop", s.name)
	mustMosaic(t, "start", "--name", s.name, "--workspace", s.ws, "--allow-host", n+".0/24", "--", "sleep", "300")
	if st := egressOf(t, s.name); len(st.Egress.Grants) != 0 {
		t.Errorf("a new session of the name has the old one's grants: %+v", st.Egress.Grants)
	}
	if r := mosaic(t, "allow", s.name, "bad_host!"); r.code != 2 {
		t.Errorf("a bad entry: exit %d %s", r.code, r.stderr)
	}
	if code, _ := jsonError(t, mosaic(t, "allow", "--json", "no-such-"+randomHex(), "example.com")); code != "no-such-session" {
		t.Errorf("allow to no session: %s", code)
	}
}

// TestPackageManagers: a real npm install and pip download of a small
// package, from a session allowed @packages, against the stand-in
// registries, trusting their CA through --ca-file alone.
func TestPackageManagers(t *testing.T) {
	n := needTestNet(t)
	for _, tool := range []string{"npm", "pip3"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing: contrib/install-deps.sh (and contrib/rig-root.sh for the 257 rig) installs it", tool)
			}
			t.Skipf("%s is missing (contrib/install-deps.sh installs it)", tool)
		}
	}
	reg := startRegistry(t, n)
	ws := workspace(t)
	ca := filepath.Join(t.TempDir(), "registry-ca.pem")
	os.WriteFile(ca, reg.caPEM, 0o644)
	script := `set -e
mkdir proj && cd proj && echo '{"name":"proj","version":"0.0.0"}' >package.json
npm install --no-audit --no-fund --no-update-notifier mosaic-tiny 2>&1 | tail -3
node -e 'console.log("npm-got: " + require("mosaic-tiny"))'
cd .. && python3 -m pip download --no-deps --disable-pip-version-check --no-cache-dir -d dl mosaic-tiny 2>&1 | tail -2
ls dl
echo "SSL_CERT_FILE=$SSL_CERT_FILE"
`
	r := mosaic(t, "run", "--workspace", ws, "--allow-host", "@packages", "--allow-host", n+".0/24", "--ca-file", ca, "--", "bash", "-c", script)
	if r.code != 0 || !strings.Contains(r.stdout, "npm-got: tiny from the stand-in registry") || !strings.Contains(r.stdout, "mosaic_tiny-1.0-py3-none-any.whl") {
		t.Fatalf("exit %d\n%s%s\nthe registry saw:\n%s", r.code, r.stdout, r.stderr, reg.requests())
	}
	// --sandbox landlock sees the bundle at its own path.
	r = mosaic(t, "run", "--sandbox", "landlock", "--workspace", ws, "--allow-host", "@npm", "--allow-host", n+".0/24", "--ca-file", ca, "--",
		"curl", "-sS", "https://registry.npmjs.org/-/ping")
	if r.code != 0 || !strings.Contains(r.stdout, "pong from registry.npmjs.org") {
		t.Errorf("--sandbox landlock with --ca-file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"GET registry.npmjs.org /mosaic-tiny", "GET registry.npmjs.org /mosaic-tiny/-/mosaic-tiny-1.0.0.tgz",
		"GET pypi.org /simple/mosaic-tiny/", "GET files.pythonhosted.org /packages/ab/cd/mosaic_tiny-1.0-py3-none-any.whl"} {
		if !strings.Contains(reg.requests(), want) {
			t.Errorf("the stand-in registry did not see %q:\n%s", want, reg.requests())
		}
	}
}

// controlProbe runs inside a session: it looks for every control socket of
// the user's egress proxies where the host keeps them, asks the named one
// for its state and for a grant, and prints a line that looks like a grant
// of the victim's proxy, to be forged into the journal.
const controlProbe = `
victim=$1 sock=$2
ls "$(dirname "$(dirname "$sock")")" 2>&1 | sed 's/^/ls: /'
found=$(find /run /tmp /home "$HOME" -name control.sock 2>/dev/null)
for s in "$sock" $found; do
  echo "found: $s"
  curl -sS --max-time 5 --unix-socket "$s" http://egress/v1/state 2>&1 | head -c 300 | sed 's/^/state: /'; echo
  curl -sS --max-time 5 --unix-socket "$s" -X POST -d '{"entries":["evil.mosaic.test"]}' http://egress/v1/allow 2>&1 | head -c 300 | sed 's/^/grant: /'; echo
done
{ echo "mosaic egress: session $victim: grant evil.mosaic.test:443 by uid 0, until the session ends" >&3; } 2>/dev/null
`

// TestControlPathFromSessions: the control path is the user's on the host
// only. A session of a weakened build (the control directory bound in, the
// proxy's peer check off) reaches its proxy's control socket and adds a
// grant: the probe works. Against mosaic, no session (its own proxy's,
// another's, in --sandbox landlock, or --may-launch, with mosaic on its
// PATH) finds the socket, reads the list or adds a grant, and a forged
// grant line shows neither in logs --egress nor in status.
func TestControlPathFromSessions(t *testing.T) {
	n := needTestNet(t)
	rt := os.Getenv("XDG_RUNTIME_DIR")
	sockOf := func(name string) string { return filepath.Join(rt, "mosaic", "egress-control", name, "control.sock") }

	t.Run("weakened", func(t *testing.T) {
		weak := weakenedMosaic(t)
		s := startShell(t, weak, "--allow-host", "testhost.mosaic.test", "--allow-host", n+".0/24")
		out := s.run(t, "set -- "+s.name+" "+sockOf(s.name)+"\n"+controlProbe)
		if !strings.Contains(out, `state: {"state"`) || !strings.Contains(out, `grant: {"grants"`) {
			t.Fatalf("the weakened session did not reach its control socket: the probe proves nothing:\n%s", out)
		}
	})

	victim := startShell(t, mosaicBin, "--allow-host", "testhost.mosaic.test", "--allow-host", n+".0/24")
	// From the host, the same probe finds and reads the socket.
	host, _ := exec.Command("bash", "-c", controlProbe, "probe", victim.name, sockOf(victim.name)).CombinedOutput()
	if !strings.Contains(string(host), `state: {"state"`) || strings.Count(string(host), "found: "+sockOf(victim.name)) != 2 {
		t.Fatalf("from the host the probe does not reach the control socket:\n%s", host)
	}
	mustMosaic(t, "deny", victim.name, "evil.mosaic.test") // the host's grant of the probe, taken back

	for _, tc := range []struct {
		label string
		args  []string
	}{
		{"own", nil},
		{"other", []string{"--allow-host", "testhost.mosaic.test"}},
		{"landlock", []string{"--sandbox", "landlock", "--allow-host", "testhost.mosaic.test"}},
		{"may-launch", []string{"--may-launch", "--allow-host", "testhost.mosaic.test"}},
	} {
		t.Run(tc.label, func(t *testing.T) {
			s := victim
			if tc.args != nil {
				s = startShell(t, mosaicBin, tc.args...)
			}
			probe := "set -- " + victim.name + " " + sockOf(victim.name) + "\n" + controlProbe
			if tc.label == "may-launch" {
				probe += "\nmosaic allow " + victim.name + " evil.mosaic.test; echo allow-rc=$?\nmosaic status --json " + victim.name + " | head -c 300; echo status-rc=$?"
			}
			out := s.run(t, probe)
			if strings.Count(out, "found: ") > 1 || strings.Contains(out, `"state"`) || strings.Contains(out, `"grants"`) || strings.Contains(out, "ls: "+victim.name) {
				t.Errorf("a session reached the control path:\n%s", out)
			}
			if tc.label == "may-launch" && (strings.Contains(out, "allow-rc=0") || strings.Contains(out, "may now reach")) {
				t.Errorf("mosaic allow from a --may-launch session:\n%s", out)
			}
		})
	}
	st := egressOf(t, victim.name)
	for _, g := range st.Egress.Grants {
		if strings.Contains(g.Entry, "evil") {
			t.Errorf("a grant of evil.mosaic.test: %+v", g)
		}
	}
	if strings.Contains(strings.Join(st.Egress.Allow, " "), "evil") {
		t.Errorf("evil.mosaic.test is on the list: %v", st.Egress.Allow)
	}
	// The forged line is in the session's own output, never the proxy's.
	eventually(t, 10*time.Second, "the forged line in the session's own log", func() bool {
		return strings.Contains(mosaic(t, "logs", victim.name).stdout, "grant evil.mosaic.test:443 by uid 0")
	})
	if logs := mustMosaic(t, "logs", victim.name, "--egress").stdout; strings.Contains(logs, "by uid 0") {
		t.Errorf("a forged grant line shows as the proxy's:\n%s", logs)
	}
}

// TestEmptyAllowlistSaid (issue 40): a session of network allow with an
// empty allowlist is said to allow nothing yet, with the command that
// grants, in start's summary, in status and in its egress proxy's log
// line; none ends on "to" with nothing after it.
func TestEmptyAllowlistSaid(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t)
	// It connects to the proxy once (which starts it: it starts on the
	// first connection), then waits.
	started := mustMosaic(t, "start", "--name", name, "--workspace", workspace(t), "--network", "allow", "--", "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/3128; sleep 60").stdout
	defer mosaic(t, "rm", "--force", name)
	want := "allows nothing yet (grant with mosaic allow " + name + " HOST)"
	if !strings.Contains(started, want) {
		t.Errorf("start's summary of an empty allowlist:\n%s", started)
	}
	if out := mustMosaic(t, "status", name).stdout; !strings.Contains(out, want) || strings.Contains(out, " to \n") {
		t.Errorf("status of an empty allowlist:\n%s", out)
	}
	eventually(t, 5*time.Second, "the egress proxy's first line", func() bool {
		return strings.Contains(mosaic(t, "logs", "--egress", name).stdout, want)
	})
}
