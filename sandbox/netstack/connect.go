package netstack

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// connectWait bounds how long a connection waits for the proxy's answer:
// longer than the proxy may take, which is its hold for the user's answer
// (--ask, 30 s: the init gave up after 15 s, and an answer in the hold's
// second half reached no one) and then its own dial (10 s).
const connectWait = 45 * time.Second

// ResolveMethod is the request the stack sends the proxy to ask whether a
// name may resolve: "RESOLVE / HTTP/1.1" with the name as its Host; 200
// when some entry of the allowlist names the host (any port), else the
// proxy's refusal, recorded as any refusal is.
const ResolveMethod = "RESOLVE"

// errRefused is the proxy's refusal of a request (ask).
var errRefused = errors.New("refused by the egress proxy")

// connect asks the proxy for a tunnel to target (HOST:PORT) and returns it
// once the proxy answered 200.
func (n *netw) connect(ctx context.Context, target string) (net.Conn, error) {
	p, err := n.dial(ctx)
	if err != nil {
		return nil, err
	}
	if err := ask(ctx, p, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n"); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// allowed asks the proxy whether host may resolve; err when the proxy gave
// no answer to that (not reached, too slow, at its connection limit), which
// the DNS answers SERVFAIL, a failure to retry: NXDOMAIN would say the name
// does not exist, and a resolver would keep that as an answer.
// Questions about one name at once are one question to the proxy: a
// resolver sends its A and AAAA queries together. Nothing is kept after
// the answer: a grant or a deny takes effect at the next query.
func (n *netw) allowed(host string) (bool, error) {
	return n.asking.do(host, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), dnsWait)
		defer cancel()
		p, err := n.dial(ctx)
		if err != nil {
			return false, err
		}
		defer p.Close()
		err = ask(ctx, p, ResolveMethod+" / HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
		if errors.Is(err, errRefused) {
			return false, nil
		}
		return err == nil, err
	})
}

// inFlight joins the questions about one name asked at once.
type inFlight struct {
	mu    sync.Mutex
	calls map[string]*flight
}

// flight is one question under way, and its answer once done is closed.
type flight struct {
	done   chan struct{}
	ok     bool
	err    error
	joined int // questions waiting for this one's answer (under inFlight.mu)
}

// do answers the question about host with ask, or with the answer of the
// same question already under way.
func (f *inFlight) do(host string, ask func() (bool, error)) (bool, error) {
	f.mu.Lock()
	if c, ok := f.calls[host]; ok {
		c.joined++
		f.mu.Unlock()
		<-c.done
		return c.ok, c.err
	}
	if f.calls == nil {
		f.calls = map[string]*flight{}
	}
	c := &flight{done: make(chan struct{})}
	f.calls[host] = c
	f.mu.Unlock()
	c.ok, c.err = ask()
	f.mu.Lock()
	delete(f.calls, host)
	f.mu.Unlock()
	close(c.done)
	return c.ok, c.err
}

// ask writes req to the proxy's connection p and reads the head of its
// answer, byte by byte so that nothing of a tunnel after it is read here;
// nil when the status is 200, errRefused when it is the proxy's refusal
// (403, or 400 for what is no host name), another error for any other
// answer (503 at the connection limit, 408, 431) or none.
func ask(ctx context.Context, p net.Conn, req string) error {
	deadline, _ := ctx.Deadline()
	_ = p.SetDeadline(deadline)
	defer p.SetDeadline(time.Time{})
	if _, err := p.Write([]byte(req)); err != nil {
		return err
	}
	head := make([]byte, 0, 256)
	one := make([]byte, 1)
	for !strings.HasSuffix(string(head), "\r\n\r\n") {
		if len(head) > maxHead {
			return fmt.Errorf("the egress proxy's answer is over %d bytes", maxHead)
		}
		if _, err := p.Read(one); err != nil {
			return err
		}
		head = append(head, one[0])
	}
	line, _, _ := strings.Cut(string(head), "\r\n")
	f := strings.Fields(line)
	switch {
	case len(f) < 2:
		return fmt.Errorf("the egress proxy's answer is no HTTP status line")
	case f[1] == "200":
		return nil
	case f[1] == "403" || f[1] == "400":
		return errRefused
	}
	return fmt.Errorf("the egress proxy answered %s", f[1])
}

// maxHead bounds the head of a proxy's answer.
const maxHead = 16 << 10

// names are the addresses the session's DNS gave out, each for one name,
// from 240.0.1.0 up: a name keeps its address while it is in the table,
// so that a client's cache stays right.
type names struct {
	mu     sync.Mutex
	byName map[string]*list.Element // of a nameAddr, in order
	byAddr map[netip.Addr]string
	order  *list.List // the least recently answered first
	next   netip.Addr
}

// nameAddr is one name given out and its address.
type nameAddr struct {
	name string
	addr netip.Addr
}

// maxNames bounds the table. Full, it forgets the name least recently
// answered, whose address is not given out again until the 2^28 of
// 240.0.0.0/4 have all been (a client that still connects to it is
// refused, as for any address no name has): it refused every new name
// instead, and with --ask, where every name resolves, a session could
// fill it and never resolve a name again.
const maxNames = 1 << 16

// The addresses given out: firstName up to lastName, then from firstName
// again.
var firstName, lastName = netip.MustParseAddr("240.0.1.0"), netip.MustParseAddr("255.255.255.254")

func newNames() *names {
	return &names{byName: map[string]*list.Element{}, byAddr: map[netip.Addr]string{}, order: list.New(), next: firstName}
}

// addr is host's address, given out now if it has none.
func (t *names) addr(host string) netip.Addr {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byName[host]; ok {
		t.order.MoveToBack(e)
		return e.Value.(nameAddr).addr
	}
	if t.order.Len() >= maxNames {
		old := t.order.Remove(t.order.Front()).(nameAddr)
		delete(t.byName, old.name)
		delete(t.byAddr, old.addr)
	}
	a := t.next
	for _, taken := t.byAddr[a]; taken; _, taken = t.byAddr[a] {
		a = t.after(a)
	}
	t.next = t.after(a)
	t.byName[host], t.byAddr[a] = t.order.PushBack(nameAddr{host, a}), host
	return a
}

// after is the address given out after a.
func (t *names) after(a netip.Addr) netip.Addr {
	if a == lastName {
		return firstName
	}
	return a.Next()
}

// target is what a connection to dst:port asks the proxy for: the name
// dst was given out for, else the address itself (which the proxy refuses:
// it connects to names only).
func (t *names) target(dst netip.Addr, port uint16) string {
	t.mu.Lock()
	host, ok := t.byAddr[dst]
	t.mu.Unlock()
	if !ok {
		host = dst.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}
