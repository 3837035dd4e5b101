package inside

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"mosaic/internal/acceptloop"
	"mosaic/sandbox"
)

// relayEgress is the session side of network allow: the init listens on
// 127.0.0.1:ProxyPort inside the session's network namespace and joins
// each connection to the egress proxy's socket, copying both ways until
// both directions are done (the unit bounds what the session spends on
// itself). It is here, not with the proxy, so that the init links no HTTP.
func relayEgress(l net.Listener, socket string) {
	_ = acceptloop.Serve(l, func(c net.Conn) {
		go func() {
			defer c.Close()
			p, err := acceptloop.DialStarting(context.Background(), socket, ProxyStartWait)
			if err != nil {
				badGateway(c, "mosaic: the session's egress proxy is not reachable: "+err.Error())
				return
			}
			defer p.Close()
			acceptloop.Join(c, p, 0)
		}()
	})
}

// ProxyStartWait bounds how long the relay (and mosaic-net) waits for a proxy that is
// still starting: a session without injected credentials starts beside its
// proxy, not after it (units' dependencies), so its first connection may
// come before the proxy listens.
const ProxyStartWait = 5 * time.Second

// badGateway answers a client of the relay whose proxy cannot be reached,
// as the proxy answers what it refuses: an HTTP 502 with msg.
func badGateway(c net.Conn, msg string) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: "+
		strconv.Itoa(len(msg)+1)+"\r\nConnection: close\r\n\r\n"+msg+"\n")
}

// ProxyEnv are the variables that point a command at the relay. NO_PROXY
// names loopback (the session's own) unless env sets it already, as a
// session allowed a host loopback port does (those names go to the proxy).
func ProxyEnv(env []string) []string {
	u := "http://127.0.0.1:" + strconv.Itoa(sandbox.ProxyPort)
	none := "localhost,127.0.0.1,::1"
	out := []string{"HTTPS_PROXY=" + u, "HTTP_PROXY=" + u, "https_proxy=" + u, "http_proxy=" + u}
	for _, kv := range env {
		if strings.HasPrefix(kv, "NO_PROXY=") {
			return out
		}
	}
	return append(out, "NO_PROXY="+none, "no_proxy="+none)
}
