package netstack

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// fakeProxy answers the stack's RESOLVE requests as the egress proxy does:
// 200 for the names in allowed, 403 for any other; it counts the requests.
type fakeProxy struct {
	allowed map[string]bool
	mu      sync.Mutex
	asked   []string
}

func (f *fakeProxy) dial(ctx context.Context) (net.Conn, error) {
	c, p := net.Pipe()
	go func() {
		defer p.Close()
		req, err := http.ReadRequest(bufio.NewReader(p))
		if err != nil {
			return
		}
		f.mu.Lock()
		f.asked = append(f.asked, req.Method+" "+req.Host)
		f.mu.Unlock()
		if req.Method == ResolveMethod && f.allowed[req.Host] {
			p.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
		} else {
			p.Write([]byte("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"))
		}
	}()
	return c, nil
}

func query(t *testing.T, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	m := dnsmessage.Message{Header: dnsmessage.Header{ID: 7, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}}}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAnswer: an allowed name gets an address of 240/8, the same one each
// time, and an empty answer for any other type; a name the proxy refuses,
// and one that is no host name (an address, a bad byte), get NXDOMAIN,
// the latter without asking the proxy; a response is not answered.
func TestAnswer(t *testing.T) {
	f := &fakeProxy{allowed: map[string]bool{"api.example.com": true}}
	n := &netw{dial: f.dial, names: newNames()}
	var first netip.Addr
	for i, q := range []string{"api.example.com.", "API.Example.COM."} {
		var m dnsmessage.Message
		if err := m.Unpack(n.answer(query(t, q, dnsmessage.TypeA))); err != nil {
			t.Fatal(err)
		}
		if m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 1 || m.ID != 7 || !m.Response {
			t.Fatalf("%s: %+v", q, m)
		}
		a := netip.AddrFrom4(m.Answers[0].Body.(*dnsmessage.AResource).A)
		if !netip.MustParsePrefix("240.0.0.0/4").Contains(a) || i == 1 && a != first {
			t.Errorf("%s: address %s (first %s)", q, a, first)
		}
		first = a
		if got := n.names.target(a, 5432); got != "api.example.com:5432" {
			t.Errorf("target of %s: %s", a, got)
		}
	}
	var m dnsmessage.Message
	if err := m.Unpack(n.answer(query(t, "api.example.com.", dnsmessage.TypeAAAA))); err != nil || m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 0 {
		t.Errorf("AAAA of an allowed name: %+v %v", m, err)
	}
	f.asked = nil
	for _, q := range []string{"other.example.com.", "1.2.3.4.", "with space.example.", "semi;colon.example.", "0.1.0.240.in-addr.arpa."} {
		b := rawQuery(q)
		var m dnsmessage.Message
		if err := m.Unpack(n.answer(b)); err != nil || m.RCode != dnsmessage.RCodeNameError || len(m.Answers) != 0 {
			t.Errorf("%s: %+v %v", q, m, err)
		}
	}
	if len(f.asked) != 1 || f.asked[0] != "RESOLVE other.example.com" {
		t.Errorf("the proxy was asked %v, want only other.example.com", f.asked)
	}
	if got := n.names.target(netip.MustParseAddr("198.18.0.3"), 443); got != "198.18.0.3:443" {
		t.Errorf("target of an address given out by no one: %s", got)
	}
	resp := query(t, "api.example.com.", dnsmessage.TypeA)
	resp[2] |= 0x80 // QR: a response
	if n.answer(resp) != nil {
		t.Error("a response was answered")
	}
}

// rawQuery is a query (type A) for name packed by hand, label by label, so
// that names dnsmessage would not build (a space) reach answer.
func rawQuery(name string) []byte {
	b := []byte{0, 7, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	label := []byte{}
	for i := 0; i < len(name); i++ {
		if name[i] == '.' {
			b = append(append(b, byte(len(label))), label...)
			label = label[:0]
			continue
		}
		label = append(label, name[i])
	}
	return append(b, 0, 0, 1, 0, 1)
}

// TestQuestionsJoined: questions about one name asked at once are one
// question to the proxy (a resolver's A and AAAA); one asked after the
// answer is asked again, so that a deny takes effect at the next query.
func TestQuestionsJoined(t *testing.T) {
	var f inFlight
	release := make(chan struct{})
	asked := 0
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := f.do("api.example.com", func() (bool, error) { asked++; <-release; return true, nil })
			if !ok || err != nil {
				t.Errorf("joined answer: %v %v", ok, err)
			}
		}()
	}
	for joined := false; !joined; time.Sleep(time.Millisecond) {
		f.mu.Lock()
		c := f.calls["api.example.com"]
		joined = c != nil && c.joined == 1 // the second question waits on the first
		f.mu.Unlock()
	}
	close(release)
	wg.Wait()
	if asked != 1 {
		t.Errorf("two questions at once asked the proxy %d times, want once", asked)
	}
	ok, _ := f.do("api.example.com", func() (bool, error) { asked++; return false, nil })
	if ok || asked != 2 {
		t.Errorf("a question after the answer: %v, asked %d times; want the new answer (false), asked twice", ok, asked)
	}
}
