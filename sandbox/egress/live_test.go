package egress

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestGroups: every group's host is a host:port with a reason; a group
// names into the list as itself; @packages is its groups; the mirror
// groups' plain hosts are plain only; an unknown group is bad input.
func TestGroups(t *testing.T) {
	for _, g := range Groups() {
		if g.Purpose == "" || len(g.Members()) == 0 {
			t.Errorf("@%s: no purpose or no hosts", g.Name)
		}
		for _, h := range append(append([]HostWhy{}, g.Hosts...), g.Plain...) {
			if n, err := NormalizeHost(h.Host); err != nil || n != h.Host || h.Why == "" {
				t.Errorf("@%s: %q (%v), reason %q", g.Name, h.Host, err, h.Why)
			}
		}
	}
	a, err := ParseAllow([]string{"@npm", "example.com", "@debian"})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Hosts["registry.npmjs.org:443"] || !a.Plain["deb.debian.org:80"] || a.Hosts["deb.debian.org:80"] || a.Plain["registry.npmjs.org:443"] {
		t.Errorf("groups expanded wrong: %+v", a)
	}
	if got := strings.Join(a.Strings(), " "); got != "@debian @npm example.com:443" {
		t.Errorf("Strings: %q", got)
	}
	p, _ := ParseAllow([]string{"@packages"})
	for _, h := range []string{"registry.npmjs.org:443", "files.pythonhosted.org:443", "static.crates.io:443", "proxy.golang.org:443", "repo.maven.apache.org:443", "rubygems.org:443"} {
		if !p.Hosts[h] {
			t.Errorf("@packages lacks %s", h)
		}
	}
	if p.Hosts["github.com:443"] || len(p.Plain) > 0 {
		t.Errorf("@packages holds more than the registries: %v %v", p.Hosts, p.Plain)
	}
	if _, err := ParseAllow([]string{"@nope"}); err == nil || !strings.Contains(err.Error(), "@npm") {
		t.Errorf("an unknown group: %v", err)
	}
}

// liveTest is an Egress on a local socket whose names all resolve to
// loopback (allowed by address), the test host a loopback server that
// answers a line and then holds the connection open until closed.
type liveTest struct {
	e    *Egress
	dial func() net.Conn
	port string
	log  *logBuf
}

func newLiveTest(t *testing.T, allow ...string) *liveTest {
	t.Helper()
	port := serveLoopback(t, func(c net.Conn) {
		io.WriteString(c, "hello from the test host\n")
		io.Copy(io.Discard, c) // held open until the proxy closes its side
		c.Close()
	})
	for i, a := range allow {
		allow[i] = strings.ReplaceAll(a, "PORT", port)
	}
	al, err := ParseAllow(append(allow, "127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	lt := &liveTest{port: port, log: &logBuf{}}
	dir := filepath.Join(t.TempDir(), "egress", "s1")
	os.MkdirAll(dir, 0o700)
	os.MkdirAll(ControlDir(dir), 0o700)
	lt.e = &Egress{Session: "s1", Allow: al, Log: lt.log, ControlDir: ControlDir(dir), Lookup: func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}}
	l, err := net.Listen("unix", filepath.Join(dir, "proxy.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go lt.e.Serve(l)
	lt.e.start()
	lt.dial = func() net.Conn {
		c, err := net.Dial("unix", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return lt
}

// open sends CONNECT target and returns the status line and, on 200, the
// connection with the test host's line read.
func (lt *liveTest) open(t *testing.T, target string) (string, net.Conn) {
	t.Helper()
	c := lt.dial()
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		c.Close()
		return resp.Status + " " + string(b), nil
	}
	line, _ := br.ReadString('\n')
	return resp.Status + " " + line, c
}

// TestGrantDeny: a host off the list is refused, counted and named with
// the mosaic allow command; granted, the same request goes through without
// a restart; denied, the open tunnel is closed and the host refused again;
// an entry of the start list can be taken back too.
func TestGrantDeny(t *testing.T) {
	lt := newLiveTest(t, "start.test:PORT")
	target := "granted.test:" + lt.port
	for range 2 {
		if st, _ := lt.open(t, target); !strings.Contains(st, "403") || !strings.Contains(st, "session s1: ") || !strings.Contains(st, "mosaic allow s1 "+target) {
			t.Fatalf("before the grant: %q", st)
		}
	}
	st := lt.e.State()
	if len(st.Refused) != 1 || st.Refused[0].Target != target || st.Refused[0].Count != 2 || st.Refused[0].Why != RefusedNotListed {
		t.Fatalf("refusals: %+v", st.Refused)
	}
	if _, err := lt.e.grant([]string{target}, 0, "tester"); err != nil {
		t.Fatal(err)
	}
	status, tunnel := lt.open(t, target)
	if tunnel == nil || !strings.Contains(status, "hello from the test host") {
		t.Fatalf("after the grant: %q", status)
	}
	if st := lt.e.State(); st.Tunnels != 1 || len(st.Grants) != 1 || st.Grants[0].By != "tester" || !strings.Contains(strings.Join(st.Allow, " "), target) {
		t.Errorf("state with a grant: %+v", st)
	}
	closed, err := lt.e.deny([]string{target}, "tester")
	if err != nil || closed != 1 {
		t.Fatalf("deny: %d %v", closed, err)
	}
	tunnel.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := tunnel.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("the tunnel is still open after deny: %v", err)
	}
	if st, _ := lt.open(t, target); !strings.Contains(st, "403") {
		t.Errorf("after deny: %q", st)
	}
	// The start list's own entry.
	start := "start.test:" + lt.port
	if st, c := lt.open(t, start); c == nil {
		t.Fatalf("start list: %q", st)
	} else {
		c.Close()
	}
	if _, err := lt.e.deny([]string{start}, "tester"); err != nil {
		t.Fatal(err)
	}
	if st, _ := lt.open(t, start); !strings.Contains(st, "403") {
		t.Errorf("a start-list host after deny: %q", st)
	}
	if _, err := lt.e.deny([]string{"never.test"}, "tester"); err == nil {
		t.Error("deny of a host never allowed: no error")
	}
	if _, err := lt.e.grant([]string{"localhost:8080"}, 0, "tester"); err == nil {
		t.Error("a grant of a host loopback port was taken")
	}
	log := lt.log.String()
	for _, want := range []string{"session s1: grant " + target + " by tester, until the session ends", "session s1: revoked " + target + " by tester: 1 open connections closed"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// TestGrantExpires: a grant with a duration ends at its time, checked on
// each request (a clock set past it), and its timer closes its tunnels.
func TestGrantExpires(t *testing.T) {
	lt := newLiveTest(t)
	target := "brief.test:" + lt.port
	var mu sync.Mutex
	now := time.Now()
	lt.e.live.mu.Lock()
	lt.e.live.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	lt.e.live.mu.Unlock()
	if _, err := lt.e.grant([]string{target}, time.Hour, "tester"); err != nil {
		t.Fatal(err)
	}
	if st, c := lt.open(t, target); c == nil {
		t.Fatalf("granted for an hour: %q", st)
	} else {
		c.Close()
	}
	mu.Lock()
	now = now.Add(time.Hour + time.Second)
	mu.Unlock()
	if st, _ := lt.open(t, target); !strings.Contains(st, "403") {
		t.Errorf("an hour later: %q", st)
	}
	if st := lt.e.State(); len(st.Grants) != 0 {
		t.Errorf("an ended grant in the state: %+v", st.Grants)
	}
	// The timer: the grant ends by itself and closes its tunnel.
	lt2 := newLiveTest(t)
	target = "brief.test:" + lt2.port
	g, _ := lt2.e.grant([]string{target}, time.Hour, "tester")
	_, tunnel := lt2.open(t, target)
	if tunnel == nil {
		t.Fatal("no tunnel")
	}
	lt2.e.live.mu.Lock()
	lg := lt2.e.live.grants[g[0].Entry]
	lt2.e.live.mu.Unlock()
	lg.timer.Stop()
	lt2.e.expire(lg) // what the timer does when it fires
	tunnel.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := tunnel.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("the tunnel is open after its grant expired: %v", err)
	}
	if !strings.Contains(lt2.log.String(), "grant "+target+" expired: 1 open connections closed") {
		t.Errorf("no expiry line:\n%s", lt2.log.String())
	}
}

// TestControl: the control socket takes grants and revocations from the
// user's process, keeps them for a proxy started again, and answers
// nothing to a client it cannot place outside every session.
func TestControl(t *testing.T) {
	lt := newLiveTest(t)
	cl, err := listenControl(lt.e.ControlDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	go lt.e.ServeControl(cl)
	cc := NewControlClient(filepath.Join(filepath.Dir(filepath.Dir(lt.e.ControlDir)), "egress", "s1"))
	ctx := context.Background()
	target := "ctl.test:" + lt.port
	gs, err := cc.Allow(ctx, []string{target, "@npm"}, 10*time.Minute)
	if err != nil || len(gs) != 2 || gs[0].Until == nil || !strings.HasPrefix(gs[0].By, "uid ") {
		t.Fatalf("allow: %+v %v", gs, err)
	}
	if _, err := cc.Allow(ctx, []string{"bad name"}, 0); err == nil {
		t.Error("a bad entry was granted")
	}
	if st, c := lt.open(t, target); c == nil {
		t.Errorf("after allow over the socket: %q", st)
	} else {
		c.Close()
	}
	st, err := cc.State(ctx)
	if err != nil || len(st.Grants) != 2 {
		t.Fatalf("state: %+v %v", st, err)
	}
	if fi, err := os.Stat(filepath.Join(lt.e.ControlDir, ControlSocketName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the control socket: %v %v", fi.Mode(), err)
	}
	// A proxy started again has the grants back.
	e2 := &Egress{Session: "s1", ControlDir: lt.e.ControlDir, Log: io.Discard}
	e2.start()
	e2.restore()
	if !e2.hostAllowed(target) || !e2.hostAllowed("registry.npmjs.org:443") {
		t.Errorf("grants not restored: %+v", e2.State())
	}
	if n, err := cc.Deny(ctx, []string{"@npm"}); err != nil || n != 0 {
		t.Errorf("deny: %d %v", n, err)
	}
	e3 := &Egress{Session: "s1", ControlDir: lt.e.ControlDir, Log: io.Discard}
	e3.start()
	e3.restore()
	if e3.hostAllowed("registry.npmjs.org:443") {
		t.Error("a revoked grant came back with a restart")
	}
	// Requests the proxy does not answer: a peer it cannot place.
	h := lt.e.controlRoutes()
	rec := &recorder{header: http.Header{}}
	req, _ := http.NewRequest("POST", "/v1/allow", strings.NewReader(`{"entries":["evil.test"]}`))
	h.ServeHTTP(rec, req.WithContext(context.WithValue(req.Context(), peerKey{}, "")))
	if rec.status != http.StatusForbidden || lt.e.hostAllowed("evil.test:443") {
		t.Errorf("an unplaced peer: %d", rec.status)
	}
}

type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

type recorder struct {
	header http.Header
	status int
	body   strings.Builder
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(s int)           { r.status = s }

// TestInSession: a process in mosaic.slice (a session, its proxy, what a
// --may-launch session starts) is not a control client.
func TestInSession(t *testing.T) {
	for cg, want := range map[string]bool{
		"0::/user.slice/user-1000.slice/user@1000.service/mosaic.slice/mosaic-a.service\n":                             true,
		"1:name=systemd:/user.slice/user-1000.slice/user@1000.service/mosaic.slice/mosaic-a.service\n0::/x\n":          true,
		"0::/user.slice/user-1000.slice/user@1000.service/app.slice/vte-spawn.scope\n":                                 false,
		"0::/user.slice/user-1000.slice/user@1000.service/mosaic.slice\n":                                              true,
		"0::/user.slice/user-1000.slice/session-2.scope\n1:name=systemd:/user.slice/user-1000.slice/session-2.scope\n": false,
	} {
		if got := inSession(cg); got != want {
			t.Errorf("inSession(%q) = %v", cg, got)
		}
	}
}

// TestMirror: a mirror group's plain host gets GET and HEAD, relayed with
// its own Host; POST, a GET with a body and a host off the group are
// refused; a pipelined second request never reaches the mirror.
func TestMirror(t *testing.T) {
	got := make(chan string, 8)
	port := serveLoopback(t, func(c net.Conn) {
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		got <- req.Method + " " + req.Host + req.URL.Path
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nmirror")
	})
	al, _ := ParseAllow([]string{"127.0.0.1"})
	al.Plain["mirror.test:"+port] = true
	e := &Egress{Session: "s1", Allow: al, Log: io.Discard, Lookup: func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}}
	l, _ := net.Listen("unix", t.TempDir()+"/p.sock")
	t.Cleanup(func() { l.Close() })
	go e.Serve(l)
	send := func(raw string) string {
		c, _ := net.Dial("unix", l.Addr().String())
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, raw)
		b, _ := io.ReadAll(c)
		return string(b)
	}
	url := "http://mirror.test:" + port + "/debian/dists/stable/Release"
	if r := send("GET " + url + " HTTP/1.1\r\nHost: other.example\r\n\r\nPOST " + url + " HTTP/1.1\r\nContent-Length: 1\r\n\r\nx"); !strings.Contains(r, "200 OK") || !strings.HasSuffix(r, "mirror") {
		t.Errorf("GET: %q", r)
	}
	if g := <-got; g != "GET mirror.test/debian/dists/stable/Release" {
		t.Errorf("the mirror got %q", g)
	}
	if r := send("HEAD " + url + " HTTP/1.1\r\nHost: mirror.test\r\n\r\n"); !strings.Contains(r, "200 OK") {
		t.Errorf("HEAD: %q", r)
	}
	<-got
	for _, raw := range []string{
		"POST " + url + " HTTP/1.1\r\nHost: mirror.test\r\nContent-Length: 2\r\n\r\nhi",
		"GET " + url + " HTTP/1.1\r\nHost: mirror.test\r\nContent-Length: 2\r\n\r\nhi",
		"GET http://elsewhere.test:" + port + "/ HTTP/1.1\r\nHost: elsewhere.test\r\n\r\n",
	} {
		if r := send(raw); !strings.Contains(r, "403") || !strings.Contains(r, "session s1") {
			t.Errorf("%q: %q", strings.SplitN(raw, "\r\n", 2)[0], r)
		}
	}
	select {
	case g := <-got:
		t.Errorf("the mirror got %q", g)
	default:
	}
	st := e.State()
	if len(st.Refused) != 2 || st.Refused[0].Why != RefusedPlain {
		t.Errorf("refusals: %+v", st.Refused)
	}
}
