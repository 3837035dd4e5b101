package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// journalPriority is the PRIORITY journald stored for the line holding
// marker under the syslog identifier id ("" when it has none yet).
func journalPriority(t *testing.T, id, marker string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, _ := exec.Command("journalctl", "--user", "-q", "--no-pager", "-t", id, "-o", "export").Output()
		for _, entry := range strings.Split(string(out), "\n\n") {
			if !strings.Contains(entry, marker) {
				continue
			}
			for _, line := range strings.Split(entry, "\n") {
				if p, ok := strings.CutPrefix(line, "PRIORITY="); ok {
					return p
				}
			}
		}
	}
	return ""
}

// TestJournalPriority (issue 31, break 6): a line a unit prints starting
// "<0>" is stored at priority 0 (emergency, which journald may wall to
// every logged-in terminal) by systemd's default, SyslogLevelPrefix=yes:
// shown with a transient unit of systemd-run on the host's user manager.
// A session's line keeps the default priority (6, info), and the session
// and its egress proxy units say SyslogLevelPrefix=no.
func TestJournalPriority(t *testing.T) {
	needRig(t)
	marker := "mosaic-prio-" + randomHex()
	id := "mosaic-prio-probe-" + randomHex()
	if out, err := exec.Command("systemd-run", "--user", "--quiet", "-p", "SyslogIdentifier="+id, "--", "echo", "<0>"+marker).CombinedOutput(); err != nil {
		t.Fatalf("systemd-run: %v %s", err, out)
	}
	if p := journalPriority(t, id, marker); p != "0" {
		t.Fatalf("a transient unit's <0> line was stored at priority %q, not 0, so this test proves nothing", p)
	}

	name := sessionName(t)
	mustMosaic(t, "start", "--name", name, "-w", workspace(t), "--network", "allow", "--allow-host", "testhost.mosaic.test",
		"--", "sh", "-c", "echo '<0>"+marker+"'; exec sleep 300")
	if p := journalPriority(t, "mosaic-"+name, marker); p != "6" {
		t.Errorf("the session's <0> line was stored at priority %q, want 6", p)
	}
	for _, unit := range []string{"mosaic-" + name + ".service", "mosaic-" + name + "-egress.service"} {
		out, _ := exec.Command("systemctl", "--user", "show", "-p", "SyslogLevelPrefix", unit).Output()
		if strings.TrimSpace(string(out)) != "SyslogLevelPrefix=no" {
			t.Errorf("%s: %s", unit, out)
		}
	}
}
