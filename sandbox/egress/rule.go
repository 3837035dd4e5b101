package egress

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"strings"

	"mosaic/internal/credvar"
)

// A Rule says where the proxy puts one credential: the session holds a
// placeholder under Var, and in a request to one of Hosts the proxy swaps
// the placeholder for the real value in the named Headers, and nowhere
// else. It holds names, never values: it goes on the egress unit's
// command line.
type Rule struct {
	Var     string   // the credential's variable
	Headers []string // canonical header names, e.g. X-Api-Key, Authorization
	// Hosts are "host:port", or "host:port/path" (a base URL's): then only
	// requests whose path is that path or under it get the value.
	Hosts []string
}

// String is the rule as --inject takes it: VAR=HEADER[,HEADER]@HOST:PORT[/PATH][,HOST:PORT[/PATH]].
func (r Rule) String() string {
	return r.Var + "=" + strings.Join(r.Headers, ",") + "@" + strings.Join(r.Hosts, ",")
}

// ParseRule reads a rule as String writes it.
func ParseRule(s string) (Rule, error) {
	v, rest, ok1 := strings.Cut(s, "=")
	h, hosts, ok2 := strings.Cut(rest, "@")
	if !ok1 || !ok2 || credvar.ValidateName(v) != nil || h == "" || hosts == "" {
		return Rule{}, fmt.Errorf("--inject %q: want VAR=HEADER[,HEADER]@HOST:PORT[/PATH][,HOST:PORT[/PATH]]", s)
	}
	r := Rule{Var: v}
	for _, name := range strings.Split(h, ",") {
		if !validHeaderName(name) {
			return Rule{}, fmt.Errorf("--inject %q: %q is not a header name", s, name)
		}
		r.Headers = append(r.Headers, http.CanonicalHeaderKey(name))
	}
	for _, hp := range strings.Split(hosts, ",") {
		n, prefix, err := SplitScope(hp)
		if err != nil {
			return Rule{}, fmt.Errorf("--inject %q: %w", s, err)
		}
		r.Hosts = append(r.Hosts, n+prefix)
	}
	return r, nil
}

// SplitScope splits a rule's host entry, HOST[:PORT][/PATH], into the
// normalized host:port and the path its value is scoped to ("" for every
// path). A path is plain: letters, digits, "-._~/", no dot segment, no
// empty one; a trailing "/" is dropped.
func SplitScope(e string) (hp, prefix string, err error) {
	host, path, scoped := strings.Cut(e, "/")
	if hp, err = NormalizeHost(host); err != nil {
		return "", "", err
	}
	if !scoped {
		return hp, "", nil
	}
	path = strings.TrimSuffix(path, "/")
	if path == "" {
		return hp, "", nil
	}
	for _, seg := range strings.Split(path, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.Trim(seg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~") != "" {
			return "", "", fmt.Errorf("%q: the path of an injection host must be plain (letters, digits, '-', '.', '_', '~' between slashes, no . or .. segment)", e)
		}
	}
	return hp, "/" + path, nil
}

// apiMethods are the methods the vendors' APIs use, and all the injected
// relay sends: TRACE (which a gateway may answer by echoing the request,
// the key in it), CONNECT inside a tunnel, TRACK, WebDAV's and any other
// are refused.
var apiMethods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true}

// relayedUpgrades are the protocols the injected relay lets a request
// upgrade to: WebSocket (a realtime API's). Any other is refused: after an
// upgrade the relay copies bytes it never reads, so h2c would carry
// requests (any method, any path) past every check here.
var relayedUpgrades = map[string]bool{"websocket": true}

// underScope reports whether the request path raw (escaped, exactly as
// the relay forwards it) is the scope's path or under it; a path that
// could mean another to the host (plainPath) is under no scope.
func underScope(prefix, raw string) bool {
	if prefix == "" {
		return true
	}
	return pathIsPlain(raw) && (raw == prefix || strings.HasPrefix(raw, prefix+"/"))
}

// pathIsPlain is plainPath; a unit test puts the check before issue 31's
// third round in its place, to show what that let through.
var pathIsPlain = plainPath

// plainPath reports whether a request path, escaped as it is sent, means
// one thing to every host: only RFC 3986's path characters but ";" (a
// path parameter, which some servers drop: /a/..;/b), no dot segment, and
// nothing encoded that need not be. An encoded unreserved character, "/",
// "\", "%" (double encoding), ";", a control byte (%00) or any byte past
// ASCII (overlong UTF-8: %c0%ae is "." to some decoders) has two
// spellings, which a host may take for one: refused. Empty segments
// (a client's "//") stay: no host reads them as a climb.
func plainPath(raw string) bool {
	if !strings.HasPrefix(raw, "/") {
		return false
	}
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '%' {
			d, ok := unhex(raw[i+1:])
			if !ok || !strings.ContainsRune(encodable, rune(d)) {
				return false
			}
			i += 2
			continue
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~/!$&'()*+,=:@", c) >= 0) {
			return false
		}
	}
	for _, seg := range strings.Split(raw, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// encodable are the characters a plain path may hold encoded: those that
// must be (a space, a quote, "?", "#"), and the delimiters a client may
// encode; every other is refused (plainPath).
const encodable = " \"#<>?[]^`{|}!$&'()*+,=:@"

// unhex is the byte two hex digits at the start of s stand for.
func unhex(s string) (byte, bool) {
	if len(s) < 2 {
		return 0, false
	}
	var b byte
	for _, c := range []byte(s[:2]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		b = b<<4 | c
	}
	return b, true
}

func validHeaderName(h string) bool {
	if h == "" || len(h) > 64 {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// PlaceholderPrefix names, in the egress unit's environment file, the
// placeholder of a credential (the real value goes under its own name).
// mosaic's credential names may not start with MOSAIC_, so none clashes.
const PlaceholderPrefix = "MOSAIC_PLACEHOLDER_"

// UpstreamRootsVar, in the egress unit's environment file, holds PEM
// certificates the proxy trusts instead of the system's roots for the
// hosts it injects into. Only tests set it (through mosaic's environment,
// TestRootsEnv), to stand a mock in for a vendor's API.
const UpstreamRootsVar = "MOSAIC_UPSTREAM_ROOTS"

// Split divides a session's credentials between the session and its
// egress proxy: a credential with a rule reaches the session as a fresh
// placeholder, and the proxy gets both the value and the placeholder; the
// others reach the session as they are.
func Split(rules []Rule, secrets []credvar.Var) (session, proxy []credvar.Var) {
	ruled := map[string]bool{}
	for _, r := range rules {
		ruled[r.Var] = true
	}
	for _, v := range secrets {
		if !ruled[v.Name] {
			session = append(session, v)
			continue
		}
		p := Placeholder(v.Value)
		session = append(session, credvar.Var{Name: v.Name, Value: p})
		proxy = append(proxy, v, credvar.Var{Name: PlaceholderPrefix + v.Name, Value: p})
	}
	return session, proxy
}

// knownPrefixes are the prefixes the vendors' keys start with, which
// their CLIs check (Claude Code tells an API key, sk-ant-api03-, from an
// OAuth token, sk-ant-oat01-; OpenAI's keys are sk-proj-, sk-svcacct- or
// sk-). The longest match is kept.
var knownPrefixes = []string{"sk-ant-api03-", "sk-ant-oat01-", "sk-ant-", "sk-proj-", "sk-svcacct-", "sk-admin-", "sk-or-v1-", "sk-",
	"gsk_", "xai-", "csk-", "AIza"}

// Placeholder makes a random stand-in of the same shape as value: its
// vendor prefix, then as many random letters and digits as the rest (at
// least 32), so that an agent's checks of the key's form pass and nothing
// of the key is in it.
func Placeholder(value string) string {
	prefix := ""
	for _, p := range knownPrefixes {
		if strings.HasPrefix(value, p) && len(p) > len(prefix) {
			prefix = p
		}
	}
	n := max(len(value)-len(prefix), 32)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(b)
}

// ExtraRootsVar, in the egress unit's environment file, holds PEM
// certificates the proxy trusts beside the system's roots for the hosts it
// injects into: a session's --ca-file (a company gateway's CA, a local
// model server's), which the agent trusts too.
const ExtraRootsVar = "MOSAIC_UPSTREAM_EXTRA_ROOTS"

// CARoots reads a session's --ca-file for the proxy's environment file.
func CARoots(path string) ([]credvar.Var, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--ca-file %s: %w", path, err)
	}
	return []credvar.Var{{Name: ExtraRootsVar, Value: base64.StdEncoding.EncodeToString(b)}}, nil
}

// TestRootsEnv names, in mosaic's own environment, a PEM file of
// certificates that the egress proxy then trusts, in place of the system's
// roots, for the hosts it injects into. Tests set it to stand a mock in for
// a vendor's API; whoever sets mosaic's environment runs mosaic anyway.
const TestRootsEnv = "MOSAIC_EGRESS_TEST_ROOTS"

// TestRoots reads TestRootsEnv's file, for the proxy's environment file.
func TestRoots(getenv func(string) string) ([]credvar.Var, error) {
	path := getenv(TestRootsEnv)
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", TestRootsEnv, err)
	}
	return []credvar.Var{{Name: UpstreamRootsVar, Value: base64.StdEncoding.EncodeToString(b)}}, nil
}
