package egress

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestAskHolds: with Ask, a connection to a host not on the list is held,
// shown as pending, and goes on once the host is granted; one that is
// denied, and one that no answer comes for, are refused, saying which; a
// session cannot hold more than maxPending hosts (the next is refused at
// once); and a held name resolves.
func TestAskHolds(t *testing.T) {
	lt := newLiveTest(t)
	lt.e.Ask = 3 * time.Second
	held := func(target string) chan string {
		ch := make(chan string, 1)
		go func() {
			// Read until the test host's line or the end: the test host
			// holds its side open until the proxy closes it.
			c := lt.dial()
			defer c.Close()
			io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			var all []byte
			buf := make([]byte, 4096)
			for !strings.Contains(string(all), "hello from the test host") {
				n, err := c.Read(buf)
				all = append(all, buf[:n]...)
				if err != nil {
					break
				}
			}
			ch <- string(all)
		}()
		return ch
	}
	waitPending := func(target string) {
		t.Helper()
		for i := 0; i < 50; i++ {
			for _, p := range lt.e.State().Pending {
				if p.Target == target {
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s is not pending: %+v", target, lt.e.State().Pending)
	}
	yes := "yes.test:" + lt.port
	got := held(yes)
	waitPending(yes)
	if _, err := lt.e.grant([]string{yes}, 0, "tester"); err != nil {
		t.Fatal(err)
	}
	if r := <-got; !strings.Contains(r, " 200 ") || !strings.Contains(r, "hello from the test host") {
		t.Errorf("held, then allowed: %q", r)
	}

	// Once: the held connection goes on, the host is granted nothing
	// (the next is held again, then refused); naming a host nothing is
	// held for changes nothing.
	once := "once.test:" + lt.port
	got = held(once)
	waitPending(once)
	if _, err := lt.e.allowOnce([]string{"other.test", once}, "tester"); err == nil || !strings.Contains(err.Error(), "holds no connection to other.test:443") {
		t.Errorf("allow --once of a host nothing is held for: %v", err)
	}
	if n, err := lt.e.allowOnce([]string{once}, "tester"); err != nil || n != 1 {
		t.Fatalf("allow --once: %d %v", n, err)
	}
	if r := <-got; !strings.Contains(r, " 200 ") || !strings.Contains(r, "hello from the test host") {
		t.Errorf("held, then let through once: %q", r)
	}
	if lt.e.hostAllowed(once) {
		t.Error("allow --once granted the host")
	}
	lt.e.Ask = 400 * time.Millisecond
	if r := <-held(once); !strings.Contains(r, " 403 ") || !strings.Contains(r, "no answer came") {
		t.Errorf("the next connection after a once: %q", r)
	}
	lt.e.Ask = 3 * time.Second

	no := "no.test:" + lt.port
	got = held(no)
	waitPending(no)
	if _, err := lt.e.deny([]string{no}, "tester"); err != nil {
		t.Fatal(err)
	}
	if r := <-got; !strings.Contains(r, " 403 ") || !strings.Contains(r, "refused by mosaic deny") {
		t.Errorf("held, then denied: %q", r)
	}

	lt.e.Ask = 300 * time.Millisecond
	if r := <-held("late.test:443"); !strings.Contains(r, " 403 ") || !strings.Contains(r, "no answer came in 300ms") {
		t.Errorf("held, unanswered: %q", r)
	}

	lt.e.Ask = 3 * time.Second
	var waiting []chan string
	for i := 0; i < maxPending; i++ {
		target := "many" + string(rune('a'+i)) + ".test:443"
		waiting = append(waiting, held(target))
		waitPending(target)
	}
	start := time.Now()
	if r := <-held("onemore.test:443"); !strings.Contains(r, " 403 ") || !strings.Contains(r, "waiting for an answer already") || time.Since(start) > time.Second {
		t.Errorf("past the bound: %q after %s", r, time.Since(start))
	}
	for _, w := range waiting {
		<-w
	}
	if p := lt.e.State().Pending; len(p) != 0 {
		t.Errorf("pending after every hold ended: %+v", p)
	}
}

// TestAskOnceHoldsNoDoor: a hostile session that keeps opening connections
// to a held host while the user answers it once gets the connection held
// then through, and no other: the ones that came after the answer are held
// again (and refused, unanswered). Before the fix, a connection that came
// while a held one was still waking joined the answered target, and a
// session that opened one every 20 ms kept that target alive, so every
// later connection went through: a once became a grant for good (this test
// let 30-odd through then; checked by reverting ask.go's detaching).
func TestAskOnceHoldsNoDoor(t *testing.T) {
	lt := newLiveTest(t)
	lt.e.Ask = 1500 * time.Millisecond
	target := "stream.test:" + lt.port
	results := make(chan string, 100)
	open := func() {
		go func() {
			st, c := lt.open(t, target)
			if c != nil {
				c.Close()
			}
			results <- st
		}()
	}
	open()
	for i := 0; ; i++ {
		if p := lt.e.State().Pending; len(p) == 1 && p[0].Waiting == 1 {
			break
		}
		if i > 100 {
			t.Fatalf("not held: %+v", lt.e.State().Pending)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := lt.e.allowOnce([]string{target}, "tester"); err != nil {
		t.Fatal(err)
	}
	const more = 40
	for range more {
		open()
		time.Sleep(20 * time.Millisecond)
	}
	through := 0
	for range more + 1 {
		if st := <-results; strings.Contains(st, "200") {
			through++
		}
	}
	if through != 1 {
		t.Errorf("%d connections went through after one once answer, want the one held then", through)
	}
	if lt.e.hostAllowed(target) {
		t.Error("allow --once granted the host")
	}
}

// TestAskDenyClosesOnce: a tunnel let through once is closed by mosaic deny
// of its host, as a granted one is. Before the fix deny said the host was
// "not on the list: nothing to take back" (nothing granted, nothing held
// any more) and the tunnel stayed open (checked against that build).
func TestAskDenyClosesOnce(t *testing.T) {
	lt := newLiveTest(t)
	lt.e.Ask = 3 * time.Second
	target := "oncedeny.test:" + lt.port
	type opened struct {
		st string
		c  net.Conn
	}
	ch := make(chan opened, 1)
	go func() {
		st, c := lt.open(t, target)
		ch <- opened{st, c}
	}()
	for i := 0; len(lt.e.State().Pending) == 0; i++ {
		if i > 100 {
			t.Fatal("not held")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := lt.e.allowOnce([]string{target}, "tester"); err != nil {
		t.Fatal(err)
	}
	o := <-ch
	if o.c == nil || !strings.Contains(o.st, "hello from the test host") {
		t.Fatalf("let through once: %q", o.st)
	}
	defer o.c.Close()
	closed, err := lt.e.deny([]string{target}, "tester")
	if err != nil || closed != 1 {
		t.Errorf("deny of a host a once tunnel is open to: closed %d, %v", closed, err)
	}
	o.c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := o.c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the once tunnel after deny: read %v, want EOF", err)
	}
}

// TestAskDenyWhileOnceConnects: a deny that comes after a once answer,
// while the proxy is still connecting the connection it let through (the
// look-up is held here by a hook, not a timing), refuses that connection.
// Before the fix the answered target was gone from the held list and no
// tunnel was recorded yet: deny said "nothing to take back" and the
// tunnel opened (checked against that build).
func TestAskDenyWhileOnceConnects(t *testing.T) {
	lt := newLiveTest(t)
	lt.e.Ask = 3 * time.Second
	target := "slowonce.test:" + lt.port
	looking, release := make(chan bool, 1), make(chan bool)
	lookup := lt.e.Lookup
	lt.e.Lookup = func(ctx context.Context, h string) ([]netip.Addr, error) {
		if h == "slowonce.test" {
			looking <- true
			<-release
		}
		return lookup(ctx, h)
	}
	got := make(chan string, 1)
	go func() {
		st, c := lt.open(t, target)
		if c != nil {
			c.Close()
		}
		got <- st
	}()
	for i := 0; len(lt.e.State().Pending) == 0; i++ {
		if i > 100 {
			t.Fatal("not held")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The same target twice (as HOST:PORT and HOST:PORT again): one
	// answer, no panic (the first took it off the held list).
	if n, err := lt.e.allowOnce([]string{target, strings.ToUpper(target)}, "tester"); err != nil || n != 1 {
		t.Fatalf("allow --once of one target named twice: %d %v", n, err)
	}
	<-looking
	_, err := lt.e.deny([]string{target}, "tester")
	close(release)
	if err != nil {
		t.Errorf("deny while the once's connection connects: %v", err)
	}
	if st := <-got; !strings.Contains(st, "403") || !strings.Contains(st, "refused by mosaic deny") {
		t.Errorf("the connection let through once, then denied while it connected: %q", st)
	}
}

// TestAskOnceRegistry: a connection to a registry host (one the proxy
// reads to refuse its writes) that is not on the list, held with Ask and
// let through once, goes on as any other host's does: its read reaches
// the registry; a write held and let through once the same way is still
// refused as a write, before the registry. Before the fix the once
// connection was refused ("taken off the session's allowlist while the
// proxy connected to it": the read path checked the list, which a once
// does not touch), and past that check the proxy's own connection to the
// registry was refused too ("not an injection host"); both checked
// against that build.
func TestAskOnceRegistry(t *testing.T) {
	m := newMockVendor(t)
	e, client, hp := registryProxyListing(t, m, false)
	e.Ask = 5 * time.Second
	heldOnce := func(method string) (int, string) {
		t.Helper()
		type answer struct {
			code int
			body string
			err  error
		}
		ch := make(chan answer, 1)
		go func() {
			var body io.Reader
			if method != "GET" {
				body = strings.NewReader(`{"name":"left-pad"}`)
			}
			req, _ := http.NewRequest(method, "https://"+hp+"/left-pad", body)
			resp, err := client.Do(req)
			if err != nil {
				ch <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			ch <- answer{code: resp.StatusCode, body: string(b)}
		}()
		for i := 0; len(e.State().Pending) == 0; i++ {
			if i > 200 {
				t.Fatalf("%s: not held", method)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if n, err := e.allowOnce([]string{hp}, "tester"); err != nil || n != 1 {
			t.Fatalf("allow --once: %d %v", n, err)
		}
		a := <-ch
		if a.err != nil {
			t.Fatalf("%s held, then let through once: %v", method, a.err)
		}
		return a.code, a.body
	}
	if code, body := heldOnce("GET"); code != http.StatusOK || !strings.Contains(body, "hello /left-pad") {
		t.Errorf("GET held, then let through once: %d %q", code, body)
	}
	if code, body := heldOnce("PUT"); code != http.StatusForbidden || !strings.Contains(body, "@npm is read-only") {
		t.Errorf("PUT held, then let through once: %d %q", code, body)
	}
	m.mu.Lock()
	lines := strings.Join(m.lines, "\n")
	m.mu.Unlock()
	if lines != "GET /left-pad" {
		t.Errorf("the registry got:\n%s\nwant the GET alone", lines)
	}
	if e.hostAllowed(hp) {
		t.Error("allow --once granted the registry host")
	}
}
