package request

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"mosaic/internal/errcode"
)

// TestPlanInjection (issue 15): with network allow a profile's ruled
// credential is injected (its hosts, a custom base URL's included, join the
// allowlist; the session trusts the proxy's CA); without a proxy it travels
// in the environment and a note says so; a credential without a rule is
// left alone.
func TestPlanInjection(t *testing.T) {
	p, _ := fixture(t)
	t.Setenv("CLAUDE_CODE_OAUTH_TOKEN", "")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-api03-x")
	t.Setenv("ANTHROPIC_BASE_URL", "https://gateway.example.com:8443/anthropic")
	t.Setenv("OTHER_TOKEN", "o")
	ws := filepath.Join(p.Home, "src", "app")
	spec, _, err := Prepare(Request{Workspace: ws, Profile: "claude-code", Credentials: []string{"OTHER_TOKEN"}, Command: []string{"true"}}, p, "/usr/bin/bwrap")
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Inject) != 1 || spec.Inject[0].Var != "ANTHROPIC_API_KEY" ||
		strings.Join(spec.Inject[0].Hosts, " ") != "api.anthropic.com:443 gateway.example.com:8443/anthropic" ||
		strings.Join(spec.Inject[0].Headers, " ") != "X-Api-Key Authorization" {
		t.Fatalf("rules %+v", spec.Inject)
	}
	// The one note is the custom endpoint's host allowed (issue 16).
	if !slices.Contains(spec.Allow, "gateway.example.com:8443") || len(spec.Notes) != 1 || !strings.Contains(spec.Notes[0], "gateway.example.com") {
		t.Errorf("allow %v, notes %v", spec.Allow, spec.Notes)
	}
	for _, v := range []string{"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "CODEX_CA_CERTIFICATE"} {
		if !slices.Contains(spec.Pass, v) {
			t.Errorf("%s is not passed to the session", v)
		}
	}
	for _, network := range []string{"host", "none"} {
		spec, _, err := Prepare(Request{Workspace: ws, Profile: "claude-code", Network: network, Command: []string{"true"}}, p, "/usr/bin/bwrap")
		if err != nil {
			t.Fatal(err)
		}
		if len(spec.Inject) != 0 || !slices.ContainsFunc(spec.Notes, func(n string) bool {
			return strings.Contains(n, "ANTHROPIC_API_KEY travel in the session's environment")
		}) {
			t.Errorf("%s: rules %v, notes %v", network, spec.Inject, spec.Notes)
		}
	}
}

// A --ca-file with an injected key: each CA variable once (systemd refuses
// a variable named twice), pointing at the proxy's files, which hold the
// --ca-file's certificates too; and --env over the caller's own.
func TestEnvironmentNamesEachVariableOnce(t *testing.T) {
	p, root := fixture(t)
	t.Setenv("CLAUDE_CODE_OAUTH_TOKEN", "")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-api03-x")
	ca := writeTestCA(t, root)
	ws := filepath.Join(p.Home, "src", "app")
	spec, _, err := Prepare(Request{Workspace: ws, Profile: "claude-code", CAFile: ca, Env: []string{"TERM=dumb"}, SetEnv: []string{"TERM=xterm"},
		Command: []string{"true"}}, p, "/usr/bin/bwrap")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, kv := range spec.Env {
		n, v, _ := strings.Cut(kv, "=")
		if _, dup := seen[n]; dup {
			t.Errorf("%s is named twice in %q", n, spec.Env)
		}
		seen[n] = v
	}
	if !strings.HasSuffix(seen["NODE_EXTRA_CA_CERTS"], "/ca.pem") || spec.CAFile == "" || len(spec.Inject) == 0 {
		t.Errorf("NODE_EXTRA_CA_CERTS=%q, CAFile %q, inject %v: want the proxy's file and the --ca-file kept for it", seen["NODE_EXTRA_CA_CERTS"], spec.CAFile, spec.Inject)
	}
	if seen["TERM"] != "xterm" {
		t.Errorf("TERM=%q, want the --env's", seen["TERM"])
	}
}

// writeTestCA writes a real self-signed CA certificate into dir/opt.
func writeTestCA(t *testing.T, dir string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mosaic test CA"}, IsCA: true,
		BasicConstraintsValid: true, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "opt", "test-ca.pem")
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPlanInjectionLocalGateway: a plain http:// base URL on the host's
// loopback (a local gateway, docs/agents.md's example) is an injection host as
// an https:// one is; a plain http:// one elsewhere is not (the key would
// cross a network in clear), and localhost without a port means port 80.
func TestPlanInjectionLocalGateway(t *testing.T) {
	p, _ := fixture(t)
	t.Setenv("CLAUDE_CODE_OAUTH_TOKEN", "")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-api03-x")
	ws := filepath.Join(p.Home, "src", "app")
	for url, want := range map[string]string{
		"http://localhost:4000":             "api.anthropic.com:443 localhost:4000",
		"http://localhost/anthropic/":       "api.anthropic.com:443 localhost:80/anthropic",
		"http://gateway.example.com:4000/a": "api.anthropic.com:443",
	} {
		t.Setenv("ANTHROPIC_BASE_URL", url)
		spec, _, err := Prepare(Request{Workspace: ws, Profile: "claude-code", Network: "allow", AllowHosts: []string{"localhost:4000", "localhost:80"}, Command: []string{"true"}}, p, "/usr/bin/bwrap")
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if len(spec.Inject) != 1 || strings.Join(spec.Inject[0].Hosts, " ") != want {
			t.Errorf("%s: rules %+v, want hosts %s", url, spec.Inject, want)
		}
	}
}

// TestPlanInjectionScopedPath (issue 31, break 8): a base URL's path scopes
// the key to it (the proxy's rule HOST:PORT/PATH), its host alone joins the
// allowlist; a base URL whose path is not plain (a dot segment, an encoded
// separator or dot, double encoding) is refused, with nothing started.
func TestPlanInjectionScopedPath(t *testing.T) {
	p, _ := fixture(t)
	t.Setenv("CLAUDE_CODE_OAUTH_TOKEN", "")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-api03-x")
	ws := filepath.Join(p.Home, "src", "app")
	t.Setenv("ANTHROPIC_BASE_URL", "https://gw.example.com/tenant-a")
	spec, _, err := Prepare(Request{Workspace: ws, Profile: "claude-code", Command: []string{"true"}}, p, "/usr/bin/bwrap")
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Inject) != 1 || !slices.Contains(spec.Inject[0].Hosts, "gw.example.com:443/tenant-a") || !slices.Contains(spec.Allow, "gw.example.com:443") {
		t.Errorf("rules %+v, allow %v", spec.Inject, spec.Allow)
	}
	for _, bad := range []string{"https://gw.example.com/tenant-a/..", "https://gw.example.com/tenant-a/%2e%2e", "https://gw.example.com/a%2fb",
		"https://gw.example.com/a%5cb", "https://gw.example.com/a/%252e%252e", "https://gw.example.com/./a"} {
		t.Setenv("ANTHROPIC_BASE_URL", bad)
		_, _, err := Prepare(Request{Workspace: ws, Profile: "claude-code", Command: []string{"true"}}, p, "/usr/bin/bwrap")
		if err == nil || !errors.Is(err, errcode.BadProfile.Target()) {
			t.Errorf("%s: %v, want a bad-profile refusal", bad, err)
		}
	}
}
