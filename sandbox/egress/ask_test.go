package egress

import (
	"io"
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
