package request

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mosaic/internal/errcode"
	"mosaic/sandbox/egress"
)

// Issue 16: a CA file, a host loopback port, the profile's arguments.
func TestPrepareAgents(t *testing.T) {
	p, root := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	cert := "-----BEGIN CERTIFICATE-----\nMIIBhTCCASugAwIBAgIBATAKBggqhkjOPQQDAjAdMRswGQYDVQQDExJtb3NhaWMg\n-----END CERTIFICATE-----\n"
	for name, content := range map[string]string{"key.pem": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
		"empty.pem": "nothing here\n", "broken.pem": cert} {
		f := filepath.Join(root, "opt", name)
		os.WriteFile(f, []byte(content), 0o644)
		_, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}, CAFile: f}, p, "/usr/bin/bwrap")
		if errcode.Of(err).Code != "bad-bind" {
			t.Errorf("--ca-file %s: %v, want bad-bind", name, err)
		}
	}
	// A good --ca-file: the CA for Node, a bundle with the system's roots
	// for every client that reads one file in place of them, bound at a
	// path of its own (bwrap) or at its own (landlock).
	// (With no egress proxy: network none. A session with one trusts the
	// proxy's files, which hold the --ca-file's certificates too: below.)
	good := writeTestCA(t, root)
	for _, mode := range []string{"bwrap", "landlock"} {
		spec, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}, CAFile: good, Sandbox: mode, Network: "none"}, p, "/usr/bin/bwrap")
		if err != nil {
			t.Fatal(err)
		}
		env := map[string]string{}
		for _, kv := range spec.Env {
			n, v, _ := strings.Cut(kv, "=")
			env[n] = v
		}
		bundle := "/run/mosaic/ca-bundle.pem"
		if mode == "landlock" {
			bundle = spec.CABundle
		}
		if env["NODE_EXTRA_CA_CERTS"] != spec.CAFile || !strings.HasPrefix(spec.CABundle, filepath.Join(p.RuntimeDir, "mosaic", "ca")+"/bundle-") {
			t.Errorf("%s: NODE_EXTRA_CA_CERTS=%q CAFile %q bundle %q", mode, env["NODE_EXTRA_CA_CERTS"], spec.CAFile, spec.CABundle)
		}
		for _, v := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT", "NPM_CONFIG_CAFILE", "CODEX_CA_CERTIFICATE"} {
			if env[v] != bundle || !slices.Contains(spec.Pass, v) {
				t.Errorf("%s: %s=%q, want %s", mode, v, env[v], bundle)
			}
		}
		if _, err := os.Stat(spec.CABundle); err == nil {
			t.Errorf("%s: Prepare wrote the bundle (it changes nothing on disk)", mode)
		}
	}
	// Network allow: the proxy's CA files (and its placeholders before it
	// writes them: statedir), whatever the --ca-file, for a package group
	// granted live (issue 39).
	for _, mode := range []string{"bwrap", "landlock"} {
		spec, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}, CAFile: good, Sandbox: mode, Network: "allow"}, p, "/usr/bin/bwrap")
		if err != nil {
			t.Fatal(err)
		}
		dir := "/run/mosaic/egress"
		if mode == "landlock" {
			dir = spec.EgressDir
		}
		for _, kv := range egress.CAEnv(dir) {
			if !slices.Contains(spec.Env, kv) {
				t.Errorf("%s, network allow: %s missing from %v", mode, kv, spec.Env)
			}
		}
	}
	spec, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}, AllowHosts: []string{"127.0.0.1:11434"}}, p, "/usr/bin/bwrap")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(spec.Allow, []string{"localhost:11434"}) || !slices.Contains(spec.Env, "NO_PROXY=") || !slices.Contains(spec.Pass, "NO_PROXY") {
		t.Errorf("a host loopback port: allow %v env %v pass %v", spec.Allow, spec.Env, spec.Pass)
	}
	t.Setenv("CODEX_API_KEY", "k")
	t.Setenv("OPENAI_BASE_URL", "https://gw.example.com/v1")
	spec, _, err = Prepare(Request{Workspace: app, Command: []string{"codex", "exec", "hi"}}, p, "/usr/bin/bwrap")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(spec.Command, " "); !strings.HasPrefix(got, "codex -c analytics.enabled=false") || !strings.HasSuffix(got, `base_url="https://gw.example.com/v1",env_key="CODEX_API_KEY",wire_api="responses",supports_websockets=false} -c model_provider=mosaic exec hi`) {
		t.Errorf("codex's command: %s", got)
	}
	if !slices.Contains(spec.Allow, "gw.example.com:443") || len(spec.Notes) != 1 {
		t.Errorf("the endpoint: allow %v notes %v", spec.Allow, spec.Notes)
	}
}

func TestShebang(t *testing.T) {
	dir := t.TempDir()
	for line, want := range map[string]string{"#!/usr/bin/env node\n": "node", "#!/usr/bin/env -S node --no-warnings\n": "node",
		"#!/opt/node/bin/node\n": "/opt/node/bin/node", "console.log(1)\n": ""} {
		f := filepath.Join(dir, "s")
		os.WriteFile(f, []byte(line), 0o755)
		if got := shebang(f); got != want {
			t.Errorf("shebang(%q) = %q, want %q", line, got, want)
		}
	}
}
