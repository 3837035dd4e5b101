package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
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

// TestRunEndsWithRefusals: a run whose command failed ends, on stderr,
// with one line per refused destination (how often, why, what grants it),
// and keeps the command's exit status; a run that was refused nothing says
// nothing of it. Checked against a build whose run printed no refusals.
func TestRunEndsWithRefusals(t *testing.T) {
	needTestNet(t)
	for _, mode := range [][]string{nil, {"--scope"}} {
		name := sessionName(t)
		argv := append(append([]string{"run"}, mode...), "--name", name, "--workspace", workspace(t), "--allow-host", "testhost.mosaic.test", "--",
			"bash", "-c", connectScript+"exit 3", "bash", "otherhost.mosaic.test:443", "otherhost.mosaic.test:8443", "otherhost.mosaic.test:443")
		r := mosaic(t, argv...)
		if r.code != 3 {
			t.Errorf("%v: exit %d, want the command's 3\n%s", mode, r.code, r.stderr)
		}
		for _, want := range []string{
			"mosaic: session " + name + ": refused otherhost.mosaic.test:443 twice: not on the list; to allow it: --allow-host otherhost.mosaic.test (while it runs: mosaic allow " + name + " otherhost.mosaic.test)\n",
			"mosaic: session " + name + ": refused otherhost.mosaic.test:8443 once: not on the list; to allow it: --allow-host otherhost.mosaic.test:8443 (while it runs: mosaic allow " + name + " otherhost.mosaic.test:8443)\n",
		} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%v: the run's end lacks %q:\n%s", mode, want, r.stderr)
			}
		}
		mosaic(t, "rm", "--force", name)
	}
	r := mosaic(t, "run", "--workspace", workspace(t), "--allow-host", "testhost.mosaic.test", "--", "true")
	if r.code != 0 || strings.Contains(r.stderr, "refused") {
		t.Errorf("a run refused nothing: exit %d\n%s", r.code, r.stderr)
	}
}

// TestEndedSessionKeepsRefusals: once a started session has ended, its
// status (text and --json) still shows what its proxy refused (target,
// count, why, when) and what was granted to it, from the record the proxy
// left at its stop. Checked against a build whose status did not read the
// record: it failed.
func TestEndedSessionKeepsRefusals(t *testing.T) {
	needTestNet(t)
	name := sessionName(t)
	mustMosaic(t, "start", "--name", name, "--workspace", workspace(t), "--allow-host", "testhost.mosaic.test", "--",
		"bash", "-c", connectScript+"sleep 300", "bash", "otherhost.mosaic.test:443")
	eventually(t, 10*time.Second, "the refusal in the running session's status", func() bool {
		return strings.Contains(mosaic(t, "status", "--json", name).stdout, `"target": "otherhost.mosaic.test:443"`)
	})
	mustMosaic(t, "allow", name, "extra.mosaic.test", "--for", "1h")
	mustMosaic(t, "stop", name)
	var doc struct {
		State  string `json:"state"`
		Record *struct {
			Final   bool `json:"final"`
			Refused []struct {
				Target, Why string
				Count       int
				Last        time.Time
			} `json:"refused"`
			Granted []struct{ Entry string } `json:"granted"`
		} `json:"egress_record"`
	}
	st := mustMosaic(t, "status", "--json", name).stdout
	if err := json.Unmarshal([]byte(st), &doc); err != nil {
		t.Fatal(err)
	}
	rec := doc.Record
	if doc.State == "active" || rec == nil || !rec.Final || len(rec.Refused) != 1 || len(rec.Granted) != 1 {
		t.Fatalf("the ended session's status lacks its egress record:\n%s", st)
	}
	if r := rec.Refused[0]; r.Target != "otherhost.mosaic.test:443" || r.Why != "not-listed" || r.Count != 1 || time.Since(r.Last) > time.Minute {
		t.Errorf("refusal %+v", r)
	}
	if rec.Granted[0].Entry != "extra.mosaic.test:443" {
		t.Errorf("grant %+v", rec.Granted[0])
	}
	text := mustMosaic(t, "status", name).stdout
	for _, want := range []string{"what its proxy kept, as it stopped", "granted extra.mosaic.test:443", "otherhost.mosaic.test:443  1×"} {
		if !strings.Contains(text, want) {
			t.Errorf("status lacks %q:\n%s", want, text)
		}
	}
}

// TestAllowOnAnySession: a session started with no network flag (generic)
// has an egress side that allows nothing yet, so that `mosaic allow` grants
// it a host while it runs, with no restart; one started with --network none
// or host is refused a grant (exit 3, one line, saying why). Checked
// against the default left none: the grant was refused.
func TestAllowOnAnySession(t *testing.T) {
	n := needTestNet(t)
	name := sessionName(t)
	// It tries the test host every 0.2 s, and says when a tunnel opens.
	loop := "try() {\n" + connectScript + "\n}\nfor i in $(seq 150); do r=$(try testhost.mosaic.test:443); case \"$r\" in *established*) echo \"GOT $r\"; break;; esac; sleep 0.2; done; sleep 300"
	mustMosaic(t, "start", "--name", name, "--workspace", workspace(t), "--", "bash", "-c", loop)
	st := decode[struct{ Network string }](t, mustMosaic(t, "status", "--json", name).stdout)
	if st.Network != "allow" {
		t.Fatalf("the default session's network is %q, want allow (nothing yet)", st.Network)
	}
	if r := mosaic(t, "run", "--workspace", workspace(t), "--", "bash", "-c", connectScript, "bash", "testhost.mosaic.test:443"); !strings.Contains(r.stdout, "403 Forbidden") {
		t.Errorf("the default reaches a host before any grant: %s%s", r.stdout, r.stderr)
	}
	mustMosaic(t, "allow", name, "testhost.mosaic.test", n+".0/24")
	eventually(t, 15*time.Second, "the granted host through the default session's proxy", func() bool {
		return strings.Contains(mosaic(t, "logs", name).stdout, "GOT testhost.mosaic.test:443 HTTP/1.1 200 Connection established|hello from testhost|")
	})
	for _, network := range []string{"none", "host"} {
		other := sessionName(t)
		mustMosaic(t, "start", "--name", other, "--workspace", workspace(t), "--network", network, "--", "sleep", "60")
		r := mosaic(t, "allow", other, "testhost.mosaic.test")
		if r.code != 3 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "--network "+network) {
			t.Errorf("allow on a session with network %s: exit %d, %q; want 3 and one line naming --network %s", network, r.code, r.stderr, network)
		}
	}
}
