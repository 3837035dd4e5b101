package request

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
		strings.Join(spec.Inject[0].Hosts, " ") != "api.anthropic.com:443 gateway.example.com:8443" ||
		strings.Join(spec.Inject[0].Headers, " ") != "X-Api-Key Authorization" {
		t.Fatalf("rules %+v", spec.Inject)
	}
	// The one note is the custom endpoint's host allowed (issue 16).
	if !slices.Contains(spec.Allow, "gateway.example.com:8443") || spec.EgressCredentialFile == "" || len(spec.Notes) != 1 || !strings.Contains(spec.Notes[0], "gateway.example.com") {
		t.Errorf("allow %v, egress file %q, notes %v", spec.Allow, spec.EgressCredentialFile, spec.Notes)
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
