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
// A yes is kept for allowedFor: a resolver's A and AAAA queries, and a
// program's lookups in a row, ask once (the proxy checks each connection
// anyway, so a deny meanwhile still refuses it). A no is never kept: a
// grant takes effect at the next query.
func (n *netw) allowed(host string) (bool, error) {
	if n.yes.fresh(host) {
		return true, nil
	}
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
	if err == nil {
		n.yes.keep(host)
	}
	return err == nil, err
}

// allowedFor is how long a name the proxy allowed resolves without
// asking again.
const allowedFor = 2 * time.Second

// yesCache holds the names the proxy allowed lately, at most maxYes of
// them (a full one is emptied: it only saves the proxy a question).
type yesCache struct {
	mu  sync.Mutex
	at  map[string]time.Time
	now func() time.Time // time.Now when nil
}

const maxYes = 1024

// fresh reports whether the proxy allowed host less than allowedFor ago.
func (c *yesCache) fresh(host string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.at[host]
	return ok && c.clock().Sub(at) < allowedFor
}

// keep notes that the proxy allowed host now.
func (c *yesCache) keep(host string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil || len(c.at) >= maxYes {
		c.at = map[string]time.Time{}
	}
	c.at[host] = c.clock()
}

func (c *yesCache) clock() time.Time {
	if c.now == nil {
		return time.Now()
	}
	return c.now()
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
