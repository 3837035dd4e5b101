package egress

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Package mirrors over plain HTTP (@debian, @ubuntu): apt reads its
// archives over http:// by default and checks what it reads against the
// archive's signed index, so the proxy relays plain HTTP to exactly the
// groups' mirror hosts, GET and HEAD without a body only, one request per
// connection: nothing the session sends can become a write to a mirror, or
// a request to another host.

// relayMirror answers a plain HTTP proxy request to a mirror host: a GET
// or HEAD is sent there with Connection: close and its answer copied back;
// any other method is refused. It reports false, having written nothing,
// when the request is not for a mirror host the list allows.
func (e *Egress) relayMirror(c net.Conn, req *http.Request) bool {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
		return false
	}
	target := plainTarget(req)
	hp, err := NormalizeHost(target)
	if err != nil || !e.plainAllowed(hp) {
		return false
	}
	if (req.Method != http.MethodGet && req.Method != http.MethodHead) || req.ContentLength != 0 || len(req.TransferEncoding) > 0 {
		why := fmt.Sprintf("plain HTTP %s to %s is refused: a mirror host gets GET and HEAD without a body only", printable(req.Method), hp)
		e.logf("refused %s %s: %s", printable(req.Method), printable(req.URL.Redacted()), why)
		e.refused(hp, RefusedPlain, why)
		e.forbid(c, why)
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	remote, why, kind := e.dialWhy(ctx, hp)
	cancel()
	if remote == nil {
		e.logf("refused %s %s: %s", printable(req.Method), printable(req.URL.Redacted()), why)
		e.refused(hp, kind, why)
		e.forbid(c, why)
		return true
	}
	defer remote.Close()
	forget, ok := e.track(hp, true, c)
	if !ok {
		why := takenBack(hp)
		e.logf("refused %s %s: %s", printable(req.Method), printable(req.URL.Redacted()), why)
		e.refused(hp, RefusedNotListed, why)
		e.forbid(c, why)
		return true
	}
	defer forget()
	req.Close = true
	// The mirror's name, whatever Host the session sent: a CDN in front of
	// a mirror delivers by Host.
	req.Host = req.URL.Hostname()
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	w := bufio.NewWriter(remote)
	_ = remote.SetWriteDeadline(time.Now().Add(e.Limits.HeadTimeout))
	if err := req.Write(w); err != nil || w.Flush() != nil {
		return true
	}
	// Only the answer flows: whatever else the client sends (a pipelined
	// request) is never read.
	buf := make([]byte, 32<<10)
	var n int64
	for {
		_ = remote.SetReadDeadline(time.Now().Add(e.Limits.IdleTimeout))
		k, err := remote.Read(buf)
		if k > 0 {
			_ = c.SetWriteDeadline(time.Now().Add(e.Limits.IdleTimeout))
			if _, werr := c.Write(buf[:k]); werr != nil {
				break
			}
			n += int64(k)
		}
		if err != nil {
			break
		}
	}
	e.logf("plain HTTP %s %s to %s (%s): %d bytes in", printable(req.Method), printable(req.URL.Redacted()), hp, remote.RemoteAddr(), n)
	return true
}

// plainTarget is the "host:port" a plain HTTP proxy request is for.
func plainTarget(req *http.Request) string {
	if req.URL == nil || req.URL.Host == "" {
		return printable(req.Host)
	}
	if req.URL.Port() == "" {
		return net.JoinHostPort(req.URL.Hostname(), "80")
	}
	return printable(req.URL.Host)
}
