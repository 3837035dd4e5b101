package egress

import (
	"fmt"
	"sort"
	"time"
)

// Hold and ask (--ask): a connection to a host not on the list is held
// open, not refused, for Egress.Ask, while the user decides: `mosaic
// allow` grants it (the held connection then goes on), `mosaic allow
// --once` lets the connections held now go on without granting anything
// (the next is held again), `mosaic deny` refuses it, and `mosaic approve` lists what every session holds and
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
	no   bool // mosaic deny answered it (or, once answered, its connections still connecting)
	once bool // mosaic allow --once answered it: the connections held now go on
	// answered is when the once came: a deny until onceDial after it
	// refuses the connections it let through that are still connecting.
	answered time.Time
}

// onceDial bounds how long after a once its connections may still be
// connecting (the dial's 10 s, and its look-up's): a deny in that time
// refuses them (trackOnce) and closes those open.
const onceDial = time.Minute

// checkOrHold is check, but with Ask a host not on the list is held for
// the user's answer: allowed then, it is no refusal. once says it was
// allowed for this connection alone (mosaic allow --once; the answer's
// target): the host is not on the list, and the caller records its tunnel
// as such (trackOnce).
func (e *Egress) checkOrHold(target string) (hp, why, kind string, once *pending) {
	hp, why, kind = e.check(target)
	if kind != RefusedNotListed || e.Ask <= 0 || hp == "" {
		return hp, why, kind, nil
	}
	ok, once, holdWhy := e.hold(hp)
	if !ok {
		return hp, holdWhy, kind, nil
	}
	return hp, "", "", once
}

// hold waits, for a connection to hp refused as not listed, until the
// user allows hp (true; once, the answered target, when for the
// connections held alone), denies it, or Ask passes (false, with why).
func (e *Egress) hold(hp string) (ok bool, once *pending, why string) {
	l := e.live
	l.mu.Lock()
	p := l.pending[hp]
	if p == nil {
		if len(l.pending) >= maxPending {
			l.mu.Unlock()
			return false, nil, fmt.Sprintf("%s is not on the session's allowlist, and %d other hosts are waiting for an answer already (to allow it, run on the host: %s)", hp, maxPending, e.AllowLine(hp))
		}
		p = &pending{Pending: Pending{Target: hp, Since: l.now()}}
		l.pending[hp] = p
		e.logf("holding a connection to %s for %s: answer with %s, mosaic deny %s %s, or mosaic approve", hp, e.Ask, e.AllowLine(hp), e.Session, hp)
	}
	p.Waiting++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		if p.Waiting--; p.Waiting == 0 && l.pending[hp] == p {
			delete(l.pending, hp)
		}
		l.mu.Unlock()
	}()
	deadline := time.Now().Add(e.Ask)
	for time.Now().Before(deadline) {
		time.Sleep(askPoll)
		l.mu.Lock()
		no, yes := p.no, p.once
		l.mu.Unlock()
		if no {
			return false, nil, hp + " was refused by mosaic deny while the connection was held"
		}
		if yes {
			return true, p, ""
		}
		if e.hostAllowed(hp) {
			return true, nil, ""
		}
	}
	return false, nil, fmt.Sprintf("%s is not on the session's allowlist, and no answer came in %s (to allow it, run on the host: %s)", hp, e.Ask, e.AllowLine(hp))
}

// answerPending marks the held targets among hosts refused (mosaic deny),
// and those let through once whose connections may still be connecting,
// and reports whether there was one; the caller holds mu.
func (l *live) answerPending(hosts []string) bool {
	any := false
	for _, h := range hosts {
		if p := l.pending[h]; p != nil {
			p.no, any = true, true
		}
		for p := range l.letOnce {
			if p.Target == h && l.now().Sub(p.answered) <= onceDial {
				p.no, any = true, true
			}
		}
	}
	return any
}

// allowOnce lets the connections held now for each of entries (HOST or
// HOST:PORT) go on without granting the host: a later connection is held
// again. It returns how many targets it answered; an entry that names no
// held target is an error, and nothing is answered then.
func (e *Egress) allowOnce(entries []string, who string) (n int, err error) {
	var hps []string
	for _, entry := range entries {
		hp, err := NormalizeHost(entry)
		if err != nil {
			return 0, fmt.Errorf("--once answers a held connection: name its HOST[:PORT] (%w)", err)
		}
		hps = append(hps, hp)
	}
	l := e.live
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := range l.letOnce {
		if l.now().Sub(p.answered) > onceDial {
			delete(l.letOnce, p)
		}
	}
	for i, hp := range hps {
		if l.pending[hp] == nil {
			return 0, fmt.Errorf("session %s holds no connection to %s for an answer (mosaic approve lists what it holds; mosaic allow without --once grants %s)", e.Session, hps[i], entries[i])
		}
	}
	for _, hp := range hps {
		// The answered target leaves the list: a connection that comes
		// after the answer is held afresh, not let through with the ones
		// held now (a session opening one while those wake kept the
		// target, and the once, alive for good).
		p := l.pending[hp]
		if p == nil {
			continue // named twice (host and host:443)
		}
		p.once, p.answered = true, l.now()
		l.letOnce[p] = true
		delete(l.pending, hp)
		n++
		e.logf("the connections held for %s are let through once by %s", hp, who)
	}
	return n, nil
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
