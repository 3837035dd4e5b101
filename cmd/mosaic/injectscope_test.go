package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scopedRelayScript runs inside the session: requests with the placeholder to
// the base URL's path, to another tenant's on the same host, through dot
// segments and encoded ones, and a TRACE; it prints each status.
const scopedRelayScript = `
v=$1
for p in /tenant-a/v1/messages /tenant-b/v1/messages /tenant-a/../tenant-b/dots /tenant-a/%2e%2e/tenant-b/encoded /tenant-a%2f..%2ftenant-b/slash; do
	printf '%s=' "$p"; curl -sS --path-as-is -o /dev/null -w '%{http_code}\n' -X POST "https://$v$p" -H "x-api-key: $ANTHROPIC_API_KEY" -d '{}'
done
printf 'TRACE='; curl -sS -o /dev/null -w '%{http_code}\n' -X TRACE "https://$v/tenant-a/trace" -H "x-api-key: $ANTHROPIC_API_KEY"
`

// TestKeyScopedRelay (issue 31, breaks 7 and 8), through the real egress
// proxy unit: with ANTHROPIC_BASE_URL=https://gw/tenant-a the key reached
// gw/tenant-b (shown with a base URL without a path: a rule for the host
// alone). Scoped, the key goes only under /tenant-a, another tenant gets
// the placeholder, dot segments and encoded separators are refused (400)
// and TRACE too (405): the vendor sees none of them.
func TestKeyScopedRelay(t *testing.T) {
	n := needTestNet(t)
	caPEM, cert := testCA(t, "mockhost.mosaic.test")
	roots := filepath.Join(t.TempDir(), "roots.pem")
	os.WriteFile(roots, caPEM, 0o644)
	key := "sk-ant-api03-" + strings.Repeat(randomHex(), 12)[:93] + "AA"
	run := func(t *testing.T, vendor *vendorMock, base string) string {
		t.Helper()
		env := []string{"ANTHROPIC_API_KEY=" + key, "CLAUDE_CODE_OAUTH_TOKEN=", "ANTHROPIC_BASE_URL=" + base, "MOSAIC_EGRESS_TEST_ROOTS=" + roots}
		r := mosaicWith(t, env, "", "run", "--workspace", workspace(t), "--profile", "claude-code", "--allow-host", n+".0/24",
			"--", "bash", "-c", scopedRelayScript, "bash", vendor.addr)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}

	weak := startVendorMock(t, n, cert)
	run(t, weak, "https://"+weak.addr)
	if got := weak.headers("/tenant-b/v1/messages"); len(got) != 1 || got[0].Get("X-Api-Key") != key {
		t.Fatalf("a base URL without a path did not send the key to /tenant-b, so this test proves nothing: %v", got)
	}

	vendor := startVendorMock(t, n, cert)
	out := run(t, vendor, "https://"+vendor.addr+"/tenant-a")
	for _, want := range []string{"/tenant-a/v1/messages=200", "/tenant-b/v1/messages=200", "/tenant-a/../tenant-b/dots=400",
		"/tenant-a/%2e%2e/tenant-b/encoded=400", "/tenant-a%2f..%2ftenant-b/slash=400", "TRACE=405"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("want %s in:\n%s", want, out)
		}
	}
	if got := vendor.headers("/tenant-a/v1/messages"); len(got) != 1 || got[0].Get("X-Api-Key") != key {
		t.Errorf("the base URL's path did not get the key: %v", got)
	}
	vendor.mu.Lock()
	defer vendor.mu.Unlock()
	for path, hs := range vendor.got {
		if path == "/tenant-a/v1/messages" {
			continue
		}
		for _, h := range hs {
			if h.Get("X-Api-Key") == key || !strings.HasPrefix(path, "/tenant-b/v1") {
				t.Errorf("the vendor got %s with x-api-key %.16q", path, h.Get("X-Api-Key"))
			}
		}
	}
}
