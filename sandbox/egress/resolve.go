package egress

import (
	"net"
	"net/http"
	"strings"
)

// resolveMethod is the request the session's network stack sends to ask
// whether a name may resolve inside (sandbox/netstack's ResolveMethod,
// which a test keeps the same): "RESOLVE / HTTP/1.1", the name as its Host.
const resolveMethod = "RESOLVE"

// resolve answers whether host may resolve in the session: 200 when an
// entry of the allowlist (the start's or a live grant) names it on some
// port, else the refusal, recorded as any refusal is (the target is the
// name alone: the port is not known until the command connects), with the
// line that grants it. The stack answers the session's DNS query by it;
// the proxy still checks each connection's HOST:PORT.
func (e *Egress) resolve(c net.Conn, host string) {
	hp, err := NormalizeHost(host)
	name, _, _ := net.SplitHostPort(hp)
	if err != nil || name == "" {
		refuse(c, http.StatusBadRequest, "mosaic egress: not a host name")
		return
	}
	if e.Ask > 0 || e.nameAllowed(name) { // with --ask, the connection is held instead
		_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
		return
	}
	why := "a DNS query for " + name + ": it is not on the session's allowlist (to allow it, run on the host: " +
		"mosaic allow " + e.Session + " " + name + "[:PORT])"
	e.logf("refused %s", why)
	e.refused(name, RefusedNotListed, why)
	e.forbid(c, why)
}

// nameAllowed reports whether some entry allows host on some port (and
// that one is not denied), plain or not, or a key is injected for it.
func (e *Egress) nameAllowed(host string) bool {
	l := e.live
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := func(m map[string]bool) bool {
		for hp, on := range m {
			if on && !l.denied[hp] && strings.HasPrefix(hp, host+":") && !strings.Contains(hp[len(host)+1:], ":") {
				return true
			}
		}
		return false
	}
	return ok(e.Allow.Hosts) || ok(e.Allow.Plain) || l.granted(func(a Allow) bool { return ok(a.Hosts) || ok(a.Plain) })
}
