package egress

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"strings"

	"mosaic/credentials"
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
	if !ok1 || !ok2 || credentials.ValidateName(v) != nil || h == "" || hosts == "" {
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
			return Rule{}, fmt.Errorf("--inject %q: %v", s, err)
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

// underScope reports whether the request path p (decoded) is the scope's
// path or under it; a path that could mean another to the host (a dot
// segment, a backslash, an encoded separator or dot, a "%" left after
// decoding: double encoding) is under no scope. rawPath is p as sent.
func underScope(prefix, p, rawPath string) bool {
	if prefix == "" {
		return true
	}
	if !plainPath(p, rawPath) {
		return false
	}
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

// plainPath reports whether a request path means one thing to every
// host: see underScope.
func plainPath(p, rawPath string) bool {
	if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\%") {
		return false
	}
	raw := strings.ToLower(rawPath)
	for _, enc := range []string{"%2e", "%2f", "%5c", "%25", "\\"} {
		if strings.Contains(raw, enc) {
			return false
		}
	}
	for _, seg := range strings.Split(p, "/") {
		// ";" starts a path parameter, which some servers drop (/a/..;/b).
		if seg, _, _ = strings.Cut(seg, ";"); seg == "." || seg == ".." {
			return false
		}
	}
	return true
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
func Split(rules []Rule, secrets []credentials.Var) (session, proxy []credentials.Var) {
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
		session = append(session, credentials.Var{Name: v.Name, Value: p})
		proxy = append(proxy, v, credentials.Var{Name: PlaceholderPrefix + v.Name, Value: p})
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
func CARoots(path string) ([]credentials.Var, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--ca-file %s: %v", path, err)
	}
	return []credentials.Var{{Name: ExtraRootsVar, Value: base64.StdEncoding.EncodeToString(b)}}, nil
}

// TestRootsEnv names, in mosaic's own environment, a PEM file of
// certificates that the egress proxy then trusts, in place of the system's
// roots, for the hosts it injects into. Tests set it to stand a mock in for
// a vendor's API; whoever sets mosaic's environment runs mosaic anyway.
const TestRootsEnv = "MOSAIC_EGRESS_TEST_ROOTS"

// TestRoots reads TestRootsEnv's file, for the proxy's environment file.
func TestRoots(getenv func(string) string) ([]credentials.Var, error) {
	path := getenv(TestRootsEnv)
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", TestRootsEnv, err)
	}
	return []credentials.Var{{Name: UpstreamRootsVar, Value: base64.StdEncoding.EncodeToString(b)}}, nil
}
