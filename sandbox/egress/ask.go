package egress

import (
	"fmt"
	"sort"
	"time"
)

// Hold and ask (--ask): a connection to a host not on the list is held
// open, not refused, for Egress.Ask, while the user decides: `mosaic
// allow` grants it (the held connection then goes on), `mosaic deny`
// refuses it, and `mosaic approve` lists what every session holds and
// answers with one of those two. Unanswered, it is refused when Ask ends,
// and recorded as any refusal. The session's DNS gives every host name an
// address then (the name is asked about when the command connects).

// Pending is a connection the proxy holds for an answer.
type Pending struct {
	Target  string    `json:"target"` // "host:port"
	Since   time.Time `json:"since"`
	Waiting int       `json:"waiting"` // connections held for it
}

// maxPending bounds the targets held at once: a session that asks for
// more is refused at once for the rest, so that it cannot flood its user.
const maxPending = 8

// askPoll is how often a held connection looks for its answer.
const askPoll = 100 * time.Millisecond

// pending is one held target.
type pending struct {
	Pending
	no bool // mosaic deny answered it
}

// checkOrHold is check, but with Ask a host not on the list is held for
// the user's answer: allowed then, it is no refusal.
func (e *Egress) checkOrHold(target string) (hp, why, kind string) {
	hp, why, kind = e.check(target)
	if kind != RefusedNotListed || e.Ask <= 0 || hp == "" {
		return hp, why, kind
	}
	if ok, holdWhy := e.hold(hp); !ok {
		return hp, holdWhy, kind
	}
	return hp, "", ""
}

// hold waits, for a connection to hp refused as not listed, until the
// user allows hp (true), denies it, or Ask passes (false, with why).
func (e *Egress) hold(hp string) (bool, string) {
	l := e.live
	l.mu.Lock()
	p := l.pending[hp]
	if p == nil {
		if len(l.pending) >= maxPending {
			l.mu.Unlock()
			return false, fmt.Sprintf("%s is not on the session's allowlist, and %d other hosts are waiting for an answer already (to allow it, run on the host: %s)", hp, maxPending, e.AllowLine(hp))
		}
		p = &pending{Pending: Pending{Target: hp, Since: l.now()}}
		l.pending[hp] = p
		e.logf("holding a connection to %s for %s: answer with %s, mosaic deny %s %s, or mosaic approve", hp, e.Ask, e.AllowLine(hp), e.Session, hp)
	}
	p.Waiting++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		if p.Waiting--; p.Waiting == 0 {
			delete(l.pending, hp)
		}
		l.mu.Unlock()
	}()
	deadline := time.Now().Add(e.Ask)
	for time.Now().Before(deadline) {
		time.Sleep(askPoll)
		l.mu.Lock()
		no := p.no
		l.mu.Unlock()
		if no {
			return false, hp + " was refused by mosaic deny while the connection was held"
		}
		if e.hostAllowed(hp) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("%s is not on the session's allowlist, and no answer came in %s (to allow it, run on the host: %s)", hp, e.Ask, e.AllowLine(hp))
}

// answerPending marks the held targets among hosts refused (mosaic deny),
// and reports whether there was one; the caller holds mu.
func (l *live) answerPending(hosts []string) bool {
	any := false
	for _, h := range hosts {
		if p := l.pending[h]; p != nil {
			p.no, any = true, true
		}
	}
	return any
}

// pendingList is what the proxy holds now, oldest first; the caller holds
// mu.
func (l *live) pendingList() []Pending {
	var out []Pending
	for _, p := range l.pending {
		out = append(out, p.Pending)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out
}
