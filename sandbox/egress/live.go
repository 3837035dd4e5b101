package egress

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"mosaic/internal/journald"
)

// What changes while a proxy runs: the grants `mosaic allow` adds (a name,
// a group, an address), the hosts `mosaic deny` takes back (a grant or an
// entry of the start list), the tunnels open to each host (a revocation
// closes them) and what the proxy refused. The start list (Egress.Allow)
// and the injection rules never change.

// Grant is one entry added to a running session's allowlist.
type Grant struct {
	Entry string     `json:"entry"` // as ParseAllow reads it: "host:port", "@group", an address or prefix
	Hosts []string   `json:"hosts,omitempty"`
	By    string     `json:"by"` // who asked: uid, pid and command of the control client
	At    time.Time  `json:"at"`
	Until *time.Time `json:"until,omitempty"` // nil: until the session ends
}

// Refusal is what the proxy refused of one target, and how often.
type Refusal struct {
	Target string    `json:"target"` // "host:port", or "-" for a refusal before a request was read
	Why    string    `json:"why"`    // RefusedNotListed, RefusedSpecial, RefusedPlain, RefusedLimit, RefusedUnreachable, RefusedGit, RefusedRegistry, RefusedSNI
	Count  int       `json:"count"`
	Last   time.Time `json:"last"`
	Detail string    `json:"detail"` // the last refusal's message
}

// The kinds of refusal.
const (
	RefusedNotListed   = "not-listed"
	RefusedSpecial     = "special-range"
	RefusedPlain       = "plain-http"
	RefusedLimit       = "limit"
	RefusedUnreachable = "unreachable"
	RefusedGit         = "git-lend"       // a request to a git host beyond what was lent (--lend-git)
	RefusedRegistry    = "registry-write" // a write to a read-only registry (registry.go)
	RefusedSNI         = "tunnel-sni"     // TLS in a tunnel naming another host than the tunnel's (sni.go)
)

// maxRefusals bounds the refusal table: targets are chosen by the session,
// and past this many the rest are only counted.
const maxRefusals = 256

// State is a running proxy's live view, as `mosaic status` shows it.
type State struct {
	Allow        []string  `json:"allow"` // the list as it is now
	Grants       []Grant   `json:"grants"`
	Denied       []string  `json:"denied,omitempty"` // start-list hosts taken back
	Tunnels      int       `json:"open_tunnels"`
	Refused      []Refusal `json:"refused"`
	RefusedOther int       `json:"refused_other,omitempty"` // refusals of targets past the table's bound
	Pending      []Pending `json:"pending,omitempty"`       // connections held for an answer (--ask)
}

type live struct {
	mu     sync.Mutex
	grants map[string]*liveGrant // by entry
	denied map[string]bool       // "host:port"
	// readOnly are the registry hosts whose write grant of the start list
	// a deny of a write grant took back (mosaic deny NAME @npm:write): an
	// allow of the host or its group gives its reads back, not its writes
	// (only a write grant does).
	readOnly map[string]bool
	tunnels  map[string]map[*openTunnel]bool
	refused  map[string]*Refusal // by target
	pending  map[string]*pending // held for an answer (--ask), by target
	letOnce  map[*pending]bool   // answered once, its connections maybe still connecting (onceDial)
	other    int
	now      func() time.Time
	history  []Grant      // the grants made, at most MaxRecorded (record.go)
	changes  atomic.Int64 // counts refusals, grants, revocations and expiries
}

type liveGrant struct {
	Grant
	allow Allow
	timer *time.Timer
}

type openTunnel struct{ conns []net.Conn }

func newLive() *live {
	return &live{grants: map[string]*liveGrant{}, denied: map[string]bool{}, readOnly: map[string]bool{},
		tunnels: map[string]map[*openTunnel]bool{}, refused: map[string]*Refusal{}, pending: map[string]*pending{}, letOnce: map[*pending]bool{}, now: time.Now}
}

// hostAllowed reports whether hp ("host:port") may be reached over CONNECT.
func (e *Egress) hostAllowed(hp string) bool {
	l := e.live
	l.mu.Lock()
	defer l.mu.Unlock()
	return e.allowedLocked(hp, false)
}

// plainAllowed reports whether hp is a mirror host reached over plain HTTP.
func (e *Egress) plainAllowed(hp string) bool {
	l := e.live
	l.mu.Lock()
	defer l.mu.Unlock()
	return e.allowedLocked(hp, true)
}

// allowedLocked is hostAllowed (plainAllowed when plain); the caller holds mu.
func (e *Egress) allowedLocked(hp string, plain bool) bool {
	l := e.live
	if l.denied[hp] {
		return false
	}
	if plain {
		return e.Allow.Plain[hp] || l.granted(func(a Allow) bool { return a.Plain[hp] })
	}
	return e.Allow.Hosts[hp] || l.granted(func(a Allow) bool { return a.Hosts[hp] })
}

// refusal says why a name may not lead to ip, with the granted addresses.
func (e *Egress) refusal(ip netip.Addr) string {
	l := e.live
	l.mu.Lock()
	defer l.mu.Unlock()
	a := e.Allow
	l.granted(func(g Allow) bool { a.Addrs = append(slices.Clip(a.Addrs), g.Addrs...); return false })
	return a.refusal(ip)
}

// granted reports whether a grant still running matches; the caller holds mu.
func (l *live) granted(match func(Allow) bool) bool {
	now := l.now()
	for _, g := range l.grants {
		if (g.Until == nil || now.Before(*g.Until)) && match(g.allow) {
			return true
		}
	}
	return false
}

// grant adds entries for d (0: until the session ends), by who; it checks
// them all before it adds any.
func (e *Egress) grant(entries []string, d time.Duration, who string) ([]Grant, error) {
	var parsed []Allow
	for _, entry := range entries {
		if _, ok, _ := parseLocal(entry); ok {
			return nil, fmt.Errorf("%q: a port of the host's loopback is allowed only when the session starts (--allow-host), which also sets its NO_PROXY", entry)
		}
		a, err := ParseAllow([]string{entry})
		if err != nil {
			return nil, err
		}
		parsed = append(parsed, a)
	}
	l := e.live
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	var out []Grant
	for _, a := range parsed {
		entry := a.Strings()[0]
		g := &liveGrant{Grant: Grant{Entry: entry, By: who, At: now}, allow: a}
		g.Hosts = hostsOf(a)
		if d > 0 {
			until := now.Add(d)
			g.Until = &until
			g.timer = time.AfterFunc(d, func() { e.expire(g) })
		}
		if old := l.grants[entry]; old != nil && old.timer != nil {
			old.timer.Stop()
		}
		l.grants[entry] = g
		for _, h := range g.Hosts {
			delete(l.denied, h)
		}
		out = append(out, g.Grant)
		if len(l.history) < MaxRecorded {
			l.history = append(l.history, g.Grant)
		}
		l.changes.Add(1)
		until := "until the session ends"
		if g.Until != nil {
			until = "until " + g.Until.UTC().Format(time.RFC3339)
		}
		what := entry
		if len(g.Hosts) > 1 || (len(g.Hosts) == 1 && g.Hosts[0] != entry) {
			what += " (" + strings.Join(g.Hosts, ", ") + ")"
		}
		e.logf("grant %s by %s, %s", what, who, until)
		e.audit(journald.EgressGrant, "egress-grant", fmt.Sprintf("session %s may now reach %s, %s (by %s)", e.Session, what, until, who),
			journald.Field{Key: "MOSAIC_ENTRY", Value: entry}, journald.Field{Key: "MOSAIC_HOSTS", Value: strings.Join(g.Hosts, " ")},
			journald.Field{Key: "MOSAIC_BY", Value: who}, journald.Field{Key: "MOSAIC_UNTIL", Value: until})
	}
	return out, nil
}

// hostsOf lists the "host:port" (plain ones too) an entry's Allow names.
func hostsOf(a Allow) []string {
	var hs []string
	for h := range a.Hosts {
		hs = append(hs, h)
	}
	for h := range a.Plain {
		hs = append(hs, h)
	}
	sort.Strings(hs)
	return hs
}

// deny takes entries back: the grants of those entries go, every host they
// name is refused from now on (also when the start list or another grant
// names it), and the tunnels open to those hosts are closed.
func (e *Egress) deny(entries []string, who string) (closed int, err error) {
	type target struct {
		entry string
		a     Allow
	}
	var ts []target
	for _, entry := range entries {
		a, err := ParseAllow([]string{entry})
		if err != nil {
			return 0, err
		}
		ts = append(ts, target{a.Strings()[0], a})
	}
	l := e.live
	l.mu.Lock()
	for _, t := range ts {
		g := l.grants[t.entry]
		hosts := hostsOf(t.a)
		if g == nil && !e.allowsAny(hosts) && !l.granted(func(a Allow) bool { return anyOf(hosts, a) }) && !l.answerPending(hosts) && !l.tunnelsTo(hosts) {
			l.mu.Unlock()
			return 0, fmt.Errorf("%s is not on session %s's list: nothing to take back (`mosaic status %s` shows the list)", t.entry, e.Session, e.Session)
		}
	}
	var conns []net.Conn
	for _, t := range ts {
		if g := l.grants[t.entry]; g != nil {
			if g.timer != nil {
				g.timer.Stop()
			}
			delete(l.grants, t.entry)
		}
		n := 0 // tunnels, each one or both of its ends
		for _, h := range hostsOf(t.a) {
			if e.allowsAny([]string{h}) || l.granted(func(a Allow) bool { return a.Hosts[h] || a.Plain[h] }) {
				l.denied[h] = true
			}
			if t.a.Write[h] && e.Allow.Write[h] {
				l.readOnly[h] = true
			}
			cs, k := l.untrackHost(h)
			conns, n = append(conns, cs...), n+k
		}
		closed += n
		e.logf("revoked %s by %s: %d open connections closed", t.entry, who, n)
		e.audit(journald.EgressRevoke, "egress-revoke", fmt.Sprintf("session %s may no longer reach %s (by %s)", e.Session, t.entry, who),
			journald.Field{Key: "MOSAIC_ENTRY", Value: t.entry}, journald.Field{Key: "MOSAIC_HOSTS", Value: strings.Join(hostsOf(t.a), " ")},
			journald.Field{Key: "MOSAIC_BY", Value: who}, journald.Field{Key: "MOSAIC_CLOSED", Value: fmt.Sprint(n)})
	}
	l.changes.Add(1)
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	e.save()
	return closed, nil
}

func (e *Egress) allowsAny(hosts []string) bool {
	for _, h := range hosts {
		if e.Allow.Hosts[h] || e.Allow.Plain[h] {
			return true
		}
	}
	return false
}

func anyOf(hosts []string, a Allow) bool {
	for _, h := range hosts {
		if a.Hosts[h] || a.Plain[h] {
			return true
		}
	}
	return false
}

// expire ends a grant given --for once its time is up, as deny would but
// for the hosts of the start list or another grant.
func (e *Egress) expire(g *liveGrant) {
	l := e.live
	l.mu.Lock()
	if l.grants[g.Entry] != g {
		l.mu.Unlock()
		return
	}
	delete(l.grants, g.Entry)
	var conns []net.Conn
	n := 0
	for _, h := range g.Hosts {
		if !e.Allow.Hosts[h] && !e.Allow.Plain[h] && !l.granted(func(a Allow) bool { return a.Hosts[h] || a.Plain[h] }) ||
			// A registry still read, its writes no longer granted: its
			// tunnels, which the proxy does not read, go (registry.go).
			g.allow.Write[h] && Guards(h) && !e.startWritesLocked(h) && !l.granted(func(a Allow) bool { return a.Write[h] }) {
			cs, k := l.untrackHost(h)
			conns, n = append(conns, cs...), n+k
		}
	}
	e.logf("grant %s expired: %d open connections closed", g.Entry, n)
	e.audit(journald.EgressExpire, "egress-expire", fmt.Sprintf("the grant of %s to session %s expired", g.Entry, e.Session),
		journald.Field{Key: "MOSAIC_ENTRY", Value: g.Entry}, journald.Field{Key: "MOSAIC_HOSTS", Value: strings.Join(g.Hosts, " ")},
		journald.Field{Key: "MOSAIC_BY", Value: g.By}, journald.Field{Key: "MOSAIC_CLOSED", Value: fmt.Sprint(n)})
	l.changes.Add(1)
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	e.save()
}

// writeTakenBackLocked reports whether entry, of the start list, is a
// package group's write grant that a deny took back (live.readOnly): the
// list shows it no more, though the group's reads may be given back. The
// caller holds mu.
func (e *Egress) writeTakenBackLocked(entry string) bool {
	name, ok := strings.CutSuffix(entry, WriteSuffix)
	g := LookupGroup(name)
	if !ok || g == nil {
		return false
	}
	for _, h := range g.Members() {
		if e.live.readOnly[h.Host] {
			return true
		}
	}
	return false
}

// track records an open tunnel to hp (over plain HTTP when plain) if hp
// is still allowed, and reports whether it is; its func forgets it. The
// check and the record are one step under mu, as a deny's or an expiry's
// removal and its closing of hp's tunnels are: a revocation that came while
// the proxy was connecting (after the request's check, during the look-up
// or the handshake) is seen here, and a tunnel recorded here is one the
// next revocation closes.
func (e *Egress) track(hp string, plain bool, conns ...net.Conn) (func(), bool) {
	l := e.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if !e.allowedLocked(hp, plain) {
		return nil, false
	}
	return l.recordLocked(hp, conns), true
}

// trackOnce records an open tunnel to hp, which the user let through
// once (mosaic allow --once, answering p): hp is not on the list, so there
// is no grant to check, but a deny that came while the proxy connected
// refuses it (false), and a later one closes it as any other. Its func
// forgets it.
func (e *Egress) trackOnce(hp string, p *pending, conns ...net.Conn) (func(), bool) {
	l := e.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.no {
		return nil, false
	}
	return l.recordLocked(hp, conns), true
}

// recordLocked records an open tunnel to hp of conns and returns what
// forgets it; the caller holds mu.
func (l *live) recordLocked(hp string, conns []net.Conn) func() {
	t := &openTunnel{conns: conns}
	if l.tunnels[hp] == nil {
		l.tunnels[hp] = map[*openTunnel]bool{}
	}
	l.tunnels[hp][t] = true
	return func() {
		l.mu.Lock()
		delete(l.tunnels[hp], t)
		if len(l.tunnels[hp]) == 0 {
			delete(l.tunnels, hp)
		}
		l.mu.Unlock()
	}
}

// tunnelsTo reports whether a tunnel is open to one of hosts (one let
// through once has no grant, but deny closes it); the caller holds mu.
func (l *live) tunnelsTo(hosts []string) bool {
	for _, h := range hosts {
		if len(l.tunnels[h]) > 0 {
			return true
		}
	}
	return false
}

// untrackHost forgets hp's tunnels and returns their connections, for the
// caller to close once it let go of mu.
func (l *live) untrackHost(hp string) (conns []net.Conn, tunnels int) {
	tunnels = len(l.tunnels[hp])
	for t := range l.tunnels[hp] {
		for _, c := range t.conns {
			if c != nil {
				conns = append(conns, c)
			}
		}
	}
	delete(l.tunnels, hp)
	return conns, tunnels
}

// refused counts a refusal of target, of kind why, with its message.
func (e *Egress) refused(target, why, detail string) {
	if e.live == nil {
		return
	}
	l := e.live
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.refused[target]
	if r == nil {
		if len(l.refused) >= maxRefusals {
			l.other++
			return
		}
		r = &Refusal{Target: target, Why: why}
		l.refused[target] = r
	}
	r.Count++
	r.Why, r.Last, r.Detail = why, l.now(), detail
	l.changes.Add(1)
	if c := r.Count; c == 1 || c == 10 || c == 100 || c%1000 == 0 {
		// An audit event for the first refusal of a target and then at
		// 10, 100 and each 1000: a session refused in a loop does not
		// flood the journal.
		host, port, _ := net.SplitHostPort(target)
		e.audit(journald.EgressRefused, "egress-refused", fmt.Sprintf("session %s was refused %s (%d times): %s", e.Session, target, c, detail),
			journald.Field{Key: "MOSAIC_HOST", Value: host}, journald.Field{Key: "MOSAIC_PORT", Value: port},
			journald.Field{Key: "MOSAIC_REASON", Value: detail}, journald.Field{Key: "MOSAIC_COUNT", Value: strconv.Itoa(c)})
	}
}

// State is the live view.
func (e *Egress) State() State {
	l := e.live
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	st := State{Grants: []Grant{}, Refused: []Refusal{}, RefusedOther: l.other}
	list := map[string]bool{}
	for _, s := range e.Allow.Strings() {
		if !e.writeTakenBackLocked(s) {
			list[s] = true
		}
	}
	for h := range l.denied {
		st.Denied = append(st.Denied, h)
		delete(list, h)
	}
	for _, g := range l.grants {
		if g.Until != nil && !now.Before(*g.Until) {
			continue
		}
		st.Grants = append(st.Grants, g.Grant)
		list[g.Entry] = true
	}
	for s := range list {
		st.Allow = append(st.Allow, s)
	}
	sort.Strings(st.Allow)
	sort.Strings(st.Denied)
	sort.Slice(st.Grants, func(i, j int) bool { return st.Grants[i].At.Before(st.Grants[j].At) })
	for _, ts := range l.tunnels {
		st.Tunnels += len(ts)
	}
	for _, r := range l.refused {
		st.Refused = append(st.Refused, *r)
	}
	st.Pending = l.pendingList()
	sort.Slice(st.Refused, func(i, j int) bool { return st.Refused[i].Last.After(st.Refused[j].Last) })
	return st
}
