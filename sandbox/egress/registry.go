package egress

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Read-only registries (issue 39). The package groups let a session read:
// resolve and install. Writing (publish, unpublish or yank, login, adduser,
// tokens) is refused unless the user grants it with the group's write
// grant, @GROUP:write. Only the hosts that take writes are read: the proxy
// terminates their TLS with the session's CA (as for key injection) to see
// each request's method and path. The hosts that take none (file hosts,
// static indexes, the Go proxy) stay tunnels the proxy does not read, and
// the hosts that take a registry's uploads are not in its group at all:
// the write grant adds them (Group.Publish).

// WriteSuffix makes a package group's entry its write grant: @npm:write.
const WriteSuffix = ":write"

// registryRule is how the proxy tells a read from a write on one host that
// takes writes: GET and HEAD are reads; a POST to one of readPosts (a path,
// or a prefix ending in "/") is a read that happens to post a body (npm
// audit's); every other request writes.
type registryRule struct {
	group     string
	readPosts []string
}

// npmReadPosts are the POSTs npm makes to read: npm audit's reports (the
// bulk advisories and the older audit endpoints). Publish (PUT /NAME),
// unpublish (DELETE), dist-tags (PUT, DELETE), deprecate (PUT), login and
// adduser (PUT /-/user/, POST /-/v1/login), tokens (/-/npm/v1/tokens),
// owner, access and team changes all write.
var npmReadPosts = []string{"/-/npm/v1/security/advisories/bulk", "/-/npm/v1/security/audits", "/-/npm/v1/security/audits/quick"}

// guarded are the hosts of the package groups that take writes, and how each
// is read. RubyGems takes gem push (POST /api/v1/gems), yank (DELETE
// /api/v1/gems/yank), owners and API keys on rubygems.org (index.rubygems.org
// is the same application behind another name); pypi.org takes logins,
// token and project changes in its web forms (its uploads go to
// upload.pypi.org, which only @pypi:write adds). None of them reads with a
// POST.
var guarded = map[string]registryRule{
	"registry.npmjs.org:443":   {group: "npm", readPosts: npmReadPosts},
	"registry.yarnpkg.com:443": {group: "npm", readPosts: npmReadPosts},
	"rubygems.org:443":         {group: "rubygems"},
	"index.rubygems.org:443":   {group: "rubygems"},
	"pypi.org:443":             {group: "pypi"},
}

// guardedNames are the host names of guarded, which the session's CA may
// vouch for from its start (a group granted live is read at once).
func guardedNames() []string {
	var names []string
	for hp := range guarded {
		h, _, _ := net.SplitHostPort(hp)
		names = append(names, h)
	}
	return names
}

// Guards reports whether hp ("host:port") is a registry host whose writes
// are refused unless granted.
func Guards(hp string) bool { _, ok := guarded[hp]; return ok }

// WriteGrant is the entry that grants writes to the guarded host hp
// ("@npm:write"), or "" for a host that is not guarded.
func WriteGrant(hp string) string {
	if r, ok := guarded[hp]; ok {
		return "@" + r.group + WriteSuffix
	}
	return ""
}

// writes reports whether req, to the guarded host hp, writes: also a
// request that may be another than it seems (disguised).
func (r registryRule) writes(req *http.Request) bool {
	if disguised(req) != "" {
		return true
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		return false
	case http.MethodPost:
		path := req.URL.EscapedPath()
		if !pathIsPlain(path) || path != sentPath(req.RequestURI) { // a dot segment or an encoded character: not what it seems
			return true
		}
		for _, p := range r.readPosts {
			if path == p || strings.HasSuffix(p, "/") && strings.HasPrefix(path, p) {
				return false
			}
		}
	}
	return true
}

// methodOverrides are the headers with which a client names the method a
// framework is to take in place of the request's own (Rails' Rack and
// Express's method-override read some of them, and Rack reads a _method
// parameter too).
// They are compared in lower case with "_" for "-", as a CGI-style server
// takes X_HTTP_Method_Override for the same header.
var methodOverrides = map[string]bool{"x-http-method-override": true, "x-http-method": true, "x-method-override": true}

// disguised says how req, to a host read for its writes, may be another
// request than the proxy sees ("" when it is what it seems): an upgrade
// (after a 101 the connection is a pipe the proxy no longer reads, and a
// registry has no protocol to upgrade to), a method override in a header
// or the query, trailers (which could carry one), or a body on a GET or
// HEAD. Such a request is taken for a write.
func disguised(req *http.Request) string {
	if len(req.Header.Values("Upgrade")) > 0 {
		return "an upgrade to another protocol"
	}
	for h := range req.Header {
		if methodOverrides[strings.ToLower(strings.ReplaceAll(h, "_", "-"))] {
			return "a method override (" + printable(h) + ")"
		}
	}
	if (req.Method == http.MethodGet || req.Method == http.MethodHead) && (req.ContentLength != 0 || len(req.TransferEncoding) > 0) {
		// A back end that ignores a read's body would take it for the
		// next request on its connection (a CL.0 desync): no client of a
		// registry sends one.
		return "a body on a " + req.Method
	}
	if len(req.Trailer) > 0 {
		return "trailers (headers after the body, which the proxy checks before)"
	}
	if q, err := url.QueryUnescape(req.URL.RawQuery); err != nil || strings.Contains(strings.ToLower(q), "_method") {
		return "a method override (_method in the query)"
	}
	return ""
}

// registryRefusal says why the proxy refuses req to hp, a host it reads
// because the registry takes writes there, or "" when it passes: a read,
// or a write the session was granted (@GROUP:write).
func (e *Egress) registryRefusal(req *http.Request, hp string) string {
	rule, ok := guarded[hp]
	if !ok || !rule.writes(req) || e.writeAllowed(hp) {
		return ""
	}
	how := ""
	if d := disguised(req); d != "" {
		how = " (" + d + ")"
	}
	return "@" + rule.group + " is read-only: " + printable(req.Method) + " " + printable(req.URL.EscapedPath()) + how +
		" writes to the registry (publish, unpublish, login or tokens); to grant it, run on the host: mosaic allow " + e.Session + " " + WriteGrant(hp)
}

// readsRegistry reports whether the proxy reads the session's requests to
// hp (an allowed host) to refuse writes: a guarded host not granted write.
func (e *Egress) readsRegistry(hp string) bool {
	return Guards(hp) && !e.writeAllowed(hp)
}

// writeAllowed reports whether hp's writes are granted: its group's write
// grant at the start (unless a deny took it back) or live.
func (e *Egress) writeAllowed(hp string) bool {
	if e.live == nil {
		return e.Allow.Write[hp]
	}
	l := e.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.startWritesLocked(hp) {
		return true
	}
	return !l.denied[hp] && l.granted(func(a Allow) bool { return a.Write[hp] })
}

// startWritesLocked reports whether the start list grants hp's writes and
// no deny took them back; the caller holds the live state's mu.
func (e *Egress) startWritesLocked(hp string) bool {
	return e.Allow.Write[hp] && !e.live.readOnly[hp]
}

// unreadable refuses a registry host the proxy would read but cannot, for
// want of a CA (one made by no proxy of mosaic's, only a test's): never a
// tunnel, whose writes would pass.
func (e *Egress) unreadable(hp string) (why, kind string) {
	if e.Inject != nil || !e.readsRegistry(hp) {
		return "", ""
	}
	return hp + " is a registry host the proxy reads to refuse writes, and it has no CA for the session to trust (to let it write, run on the host: mosaic allow " +
		e.Session + " " + WriteGrant(hp) + ")", RefusedRegistry
}

// trackTunnel is track for a tunnel the proxy does not read: a registry
// host's write grant that ended (or was taken back) while the proxy
// connected leaves it a host the proxy must read, so no tunnel. Checked
// after the tunnel is recorded, so that an expiry after the check closes
// it (expire closes a registry's tunnels once its writes are no longer
// granted).
func (e *Egress) trackTunnel(hp string, conns ...net.Conn) (func(), bool) {
	forget, ok := e.track(hp, false, conns...)
	if ok && e.readsRegistry(hp) {
		forget()
		return nil, false
	}
	return forget, ok
}
