package egress

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// caValidity is how long a session's CA lives: long enough for a session
// that runs for weeks, short enough that a copy is worth little after.
// Leaf certificates live a day and are made again as needed.
const (
	caValidity   = 30 * 24 * time.Hour
	leafValidity = 24 * time.Hour
)

// NewInjector makes a session's CA and binds each rule to its value and
// placeholder, read by value(name), and each git lend to its token, user
// and placeholder (lend i's read as GitTokenVar(i), GitUserVar(i),
// GitPlaceholderVar(i)). roots are the certificates the real hosts are
// checked against (nil: the system's).
func NewInjector(session string, rules []Rule, git []GitLend, value func(string) (string, bool), roots *x509.CertPool) (*Injector, error) {
	in := &Injector{byHost: map[string][]injection{}, git: map[string][]gitLent{}, roots: roots, leaves: map[string]*tls.Certificate{}}
	var names []string
	seen := map[string]bool{}
	for i, g := range git {
		token, ok1 := value(GitTokenVar(i))
		user, ok2 := value(GitUserVar(i))
		ph, ok3 := value(GitPlaceholderVar(i))
		if !ok1 || !ok2 || !ok3 || token == "" || len(ph) < 16 {
			return nil, errNoGitValue
		}
		for _, hp := range g.Hosts() {
			in.git[hp] = append(in.git[hp], gitLent{GitLend: g, user: user, token: token, placeholder: ph})
			if h, _, _ := net.SplitHostPort(hp); !seen[h] {
				seen[h] = true
				names = append(names, h)
			}
		}
	}
	for _, r := range rules {
		key, ok1 := value(r.Var)
		ph, ok2 := value(PlaceholderPrefix + r.Var)
		if !ok1 || !ok2 || key == "" || len(ph) < 16 {
			return nil, fmt.Errorf("credential %s or its placeholder did not arrive (the environment file was gone before the proxy started)", r.Var)
		}
		for _, entry := range r.Hosts {
			hp, prefix, err := SplitScope(entry)
			if err != nil {
				return nil, err
			}
			in.byHost[hp] = append(in.byHost[hp], injection{rule: r, key: key, placeholder: ph, prefix: prefix})
			h, _, _ := net.SplitHostPort(hp)
			if !seen[h] {
				seen[h] = true
				names = append(names, h)
			}
		}
	}
	// The registries the proxy reads to refuse writes (registry.go): a
	// package group granted live is read at once, by the same CA.
	for _, h := range guardedNames() {
		if !seen[h] {
			seen[h] = true
			names = append(names, h)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "mosaic session " + session + " egress CA", Organization: []string{"mosaic"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		// The CA can vouch for the injection hosts only: a copy of its
		// certificate trusted somewhere else, or its key were it ever
		// taken, is worth nothing for any other name or for an address.
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         names,
		ExcludedIPRanges:            []*net.IPNet{{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, {IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	in.caCert, _ = x509.ParseCertificate(der)
	in.caKey = key
	in.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return in, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// covers reports whether the proxy terminates TLS for hp.
func (in *Injector) covers(hp string) bool {
	return in != nil && (len(in.byHost[hp]) > 0 || len(in.git[hp]) > 0)
}

// scoped reports whether a rule for hp is scoped to a path.
func (in *Injector) scoped(hp string) bool {
	for _, inj := range in.byHost[hp] {
		if inj.prefix != "" {
			return true
		}
	}
	return false
}

// refusal is why the relay to the injection host hp refuses req, with the
// status it answers ("" when it does not): a method no API uses, an
// upgrade to a protocol the relay cannot check (relayedUpgrades), or,
// where a rule is scoped to a path, a path that could mean another to the
// host, or that the relay would not forward byte for byte as it was sent
// (what is checked is what is sent).
func (in *Injector) refusal(req *http.Request, hp string) (int, string) {
	if !apiMethods[req.Method] {
		return http.StatusMethodNotAllowed, "a method no API uses (GET, HEAD, POST, PUT, PATCH and DELETE are relayed)"
	}
	if up := req.Header.Values("Upgrade"); len(up) > 1 || len(up) == 1 && (!relayedUpgrades[strings.ToLower(up[0])] || req.Method != "GET") {
		return http.StatusBadRequest, "an upgrade to a protocol the relay cannot check (only a GET's upgrade to WebSocket is relayed)"
	}
	if raw := req.URL.EscapedPath(); in.scoped(hp) && (!pathIsPlain(raw) || raw != sentPath(req.RequestURI)) {
		return http.StatusBadRequest, "its path has a dot segment, a path parameter, or an encoded character that has another spelling, where a credential is scoped to a path"
	}
	return 0, ""
}

// sentPath is the path of a request target as the client sent it (origin
// or absolute form), without its query.
func sentPath(target string) string {
	target, _, _ = strings.Cut(target, "?")
	if i := strings.Index(target, "://"); i > 0 && !strings.HasPrefix(target, "/") {
		rest := target[i+3:]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			return rest[j:]
		}
		return ""
	}
	return target
}

// leaf returns a certificate for host from the session's CA.
func (in *Injector) leaf(host string) (*tls.Certificate, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if c, ok := in.leaves[host]; ok && time.Until(c.Leaf.NotAfter) > time.Hour {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	notAfter := now.Add(leafValidity)
	if notAfter.After(in.caCert.NotAfter) {
		notAfter = in.caCert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, in.caCert, &key.PublicKey, in.caKey)
	if err != nil {
		return nil, err
	}
	leaf, _ := x509.ParseCertificate(der)
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	in.leaves[host] = c
	return c, nil
}

// systemBundles are where distributions keep their root certificates.
var systemBundles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem"}

// Files are the session's CA certificate and a bundle of the system's
// roots plus it (for clients that read one file in place of the system's),
// as the session sees them.
const (
	CAFile     = "ca.pem"
	BundleFile = "bundle.pem"
)

// WriteCA writes the CA certificate and the bundle into dir, the egress
// unit's socket directory, which the session has bound read-only.
func (in *Injector) WriteCA(dir string) error {
	// The session's own --ca-file goes in the same files: a runtime reads
	// one variable, and it must trust both.
	ca := append(append([]byte{}, in.CAPEM...), in.ExtraPEM...)
	for name, data := range map[string][]byte{CAFile: ca, BundleFile: Bundle(ca)} {
		if err := writePublic(filepath.Join(dir, name), data); err != nil {
			return err
		}
	}
	return nil
}

// Bundle is the system's root certificates followed by extra (PEM).
func Bundle(extra []byte) []byte {
	bundle := []byte{}
	for _, f := range systemBundles {
		if b, err := os.ReadFile(f); err == nil {
			bundle = append(b, '\n')
			break
		}
	}
	return append(bundle, extra...)
}

// BundlePath names, in dir, the file of bundle: by its content, so that
// sessions trusting one CA share one file and a file once written never
// changes under a session reading it.
func BundlePath(dir string, bundle []byte) string {
	sum := sha256.Sum256(bundle)
	return filepath.Join(dir, "bundle-"+hex.EncodeToString(sum[:12])+".pem")
}

// WriteBundle writes bundle at path (BundlePath's) unless it is there.
func WriteBundle(path string, bundle []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, bundle) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return writePublic(path, bundle)
}

// writePublic writes certificates (nothing secret) atomically.
func writePublic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// CAEnv are the variables that make a session's runtimes trust its CA,
// given the directory where the session sees the files: Node and Bun add
// NODE_EXTRA_CA_CERTS to their roots; OpenSSL, Go, Rust's native-tls and
// rustls-native-certs, Python's requests, curl and Codex read one file in
// place of the system's, hence the bundle.
func CAEnv(dirInside string) []string {
	return TrustEnv(dirInside+"/"+CAFile, dirInside+"/"+BundleFile)
}

// TrustEnv are the variables that make the common clients trust a CA, given
// its certificates alone (ca) and a bundle of the system's roots and them:
// Node and Bun add NODE_EXTRA_CA_CERTS to their own roots; OpenSSL (and
// what links it), Go, Rust's native-tls and rustls-native-certs read
// SSL_CERT_FILE, Python's requests REQUESTS_CA_BUNDLE, pip PIP_CERT (its
// own certifi otherwise), curl CURL_CA_BUNDLE, git GIT_SSL_CAINFO, Codex
// CODEX_CA_CERTIFICATE, each in place of the system's roots, hence the
// bundle. npm gets it as its cafile too: a distribution's /etc/npmrc may
// name the system's bundle as cafile (Debian's and NodeSource's do), and
// npm then ignores NODE_EXTRA_CA_CERTS.
func TrustEnv(ca, bundle string) []string {
	return []string{"NODE_EXTRA_CA_CERTS=" + ca, "SSL_CERT_FILE=" + bundle, "REQUESTS_CA_BUNDLE=" + bundle,
		"CURL_CA_BUNDLE=" + bundle, "GIT_SSL_CAINFO=" + bundle, "PIP_CERT=" + bundle, "NPM_CONFIG_CAFILE=" + bundle,
		"CODEX_CA_CERTIFICATE=" + bundle}
}

// ExtraFile is where mosaic leaves, in the egress directory, the session's
// --ca-file certificates for a proxy that gets no environment file (a
// session it puts no credential in): it trusts them beside the system's
// roots for the hosts it reads, and its CA files hold them too.
const ExtraFile = "extra.pem"

// WritePlaceholders makes, in the egress directory dir, what the session's
// trust variables (CAEnv) name until its proxy writes its CA there: a
// session that does not wait for its proxy may start a client first, and a
// missing file is an error to most (curl, OpenSSL) and a warning to Node.
// CAFile is the session's --ca-file certificates, or nothing; bundle is the
// bundle they name meanwhile, as the session sees it (the system's, or the
// --ca-file's bundle). ExtraFile gets caPEM for the proxy.
func WritePlaceholders(dir string, caPEM []byte, bundle string) error {
	if len(caPEM) > 0 {
		if err := writePublic(filepath.Join(dir, ExtraFile), caPEM); err != nil {
			return err
		}
	}
	if err := writePublic(filepath.Join(dir, CAFile), caPEM); err != nil {
		return err
	}
	link := filepath.Join(dir, BundleFile)
	os.Remove(link)
	return os.Symlink(bundle, link)
}

// SystemBundle is the system's bundle of root certificates, or "".
func SystemBundle() string {
	for _, f := range systemBundles {
		if _, err := os.Stat(f); err == nil {
			return f
		}
	}
	return ""
}
