package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRefusalSaysTheGrant: curl through a session's egress proxy to a host
// off its list prints the session and the exact `mosaic allow` line: with
// -v the CONNECT's reason phrase (curl's plain "CONNECT tunnel failed,
// response 403" is all it says without), and the body of a plain HTTP
// refusal. Checked against a proxy whose phrase was "Forbidden": it failed.
func TestRefusalSaysTheGrant(t *testing.T) {
	needTestNet(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	name := sessionName(t)
	r := mosaic(t, "run", "--name", name, "--workspace", workspace(t), "--allow-host", "testhost.mosaic.test", "--",
		"sh", "-c", "curl -sSv --max-time 5 https://otherhost.mosaic.test/; curl -sS --max-time 5 https://otherhost.mosaic.test:8443/; curl -sS --max-time 5 http://otherhost.mosaic.test/")
	for _, want := range []string{
		"< HTTP/1.1 403 Forbidden: mosaic egress: session " + name + ": otherhost.mosaic.test:443 is not on the session's allowlist (to allow it, run on the host: mosaic allow " + name + " otherhost.mosaic.test)",
		"CONNECT tunnel failed, response 403",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("curl's stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if want := "for HTTPS to it, run on the host: mosaic allow " + name + " otherhost.mosaic.test)"; !strings.Contains(r.stdout, want) {
		t.Errorf("plain HTTP's body lacks %q:\n%s", want, r.stdout)
	}
}
