package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"mosaic/internal/journald"
)

// journalEvents reads the user's journal entries matching the journalctl
// matches, as journalctl -o json writes them.
func journalEvents(t *testing.T, matches ...string) []map[string]any {
	t.Helper()
	out, _ := exec.Command("journalctl", append([]string{"--user", "--no-pager", "-q", "-o", "json"}, matches...)...).Output()
	return parseJournalJSON(string(out))
}

// parseJournalJSON is the entries of journalctl -o json's output.
func parseJournalJSON(out string) []map[string]any {
	var events []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			events = append(events, m)
		}
	}
	return events
}

// TestAuditGrantEvents: mosaic allow and mosaic deny on a running session
// each leave one journal entry of their MESSAGE_ID, written by the
// session's egress proxy (its _SYSTEMD_USER_UNIT, which journald sets),
// with the entry and who gave it in fields of their own; the session's own
// attempt to write one (printed, and sent to journald's socket where it
// can reach it), and the same sent from the host, which reaches the
// journal, are never among the proxy's.
func TestAuditGrantEvents(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	name := sessionName(t)
	forge := "MESSAGE_ID=" + journald.EgressGrant + "\nMOSAIC_SESSION=" + name + "\nMOSAIC_EVENT=egress-grant\nMOSAIC_ENTRY=forged.example:443\nMESSAGE=forged\n"
	script := `printf '%s' "$1"; printf '%s' "$1" | logger --journald 2>/dev/null; echo "logger=$?"; exec sleep 60`
	mustMosaic(t, "start", "--name", name, "--workspace", ws, "--allow-host", "example.com", "--", "sh", "-c", script, "sh", forge)
	// The same forgery from the host, where journald's socket is there:
	// it reaches the journal, so the unit is what tells it apart.
	if err := journald.Send([]journald.Field{{Key: "MESSAGE_ID", Value: journald.EgressGrant}, {Key: "MOSAIC_SESSION", Value: name},
		{Key: "MOSAIC_ENTRY", Value: "forged.example:443"}, {Key: "MESSAGE", Value: "forged from the host"}}); err != nil {
		t.Fatalf("the host's forgery: %v", err)
	}
	mustMosaic(t, "allow", name, "example.org")
	mustMosaic(t, "deny", name, "example.org")
	egressUnit := "mosaic-" + name + "-egress.service"

	var grants, revokes []map[string]any
	eventually(t, 10*time.Second, "the grant and revocation events in the journal", func() bool {
		grants = journalEvents(t, "MESSAGE_ID="+journald.EgressGrant, "MOSAIC_SESSION="+name, "_SYSTEMD_USER_UNIT="+egressUnit)
		revokes = journalEvents(t, "MESSAGE_ID="+journald.EgressRevoke, "MOSAIC_SESSION="+name, "_SYSTEMD_USER_UNIT="+egressUnit)
		return len(grants) >= 1 && len(revokes) >= 1
	})
	if len(grants) != 1 || grants[0]["MOSAIC_ENTRY"] != "example.org:443" || !strings.Contains(str(grants[0]["MOSAIC_BY"]), "uid ") ||
		grants[0]["SYSLOG_IDENTIFIER"] != journald.Identifier || grants[0]["MOSAIC_UNTIL"] != "until the session ends" {
		t.Errorf("the proxy's grant events: %v, want one of example.org with who gave it", grants)
	}
	if len(revokes) != 1 || revokes[0]["MOSAIC_ENTRY"] != "example.org:443" {
		t.Errorf("the proxy's revocation events: %v", revokes)
	}
	// The forgeries: whatever reached the journal is its writer's unit's,
	// never the proxy's; the host's did reach it.
	forged := 0
	for _, e := range journalEvents(t, "MESSAGE_ID="+journald.EgressGrant, "MOSAIC_SESSION="+name) {
		if e["MOSAIC_ENTRY"] == "forged.example:443" {
			forged++
			t.Logf("a forged entry reached the journal as %v's: %v", e["_SYSTEMD_USER_UNIT"], e["MESSAGE"])
			if e["_SYSTEMD_USER_UNIT"] == egressUnit {
				t.Errorf("a forged audit event carries the proxy's unit: %v", e)
			}
		}
	}
	if forged == 0 {
		t.Error("the host's forged entry is not in the journal: the test shows nothing")
	}
	logs := mustMosaic(t, "logs", name).stdout
	if !strings.Contains(logs, "MESSAGE_ID="+journald.EgressGrant) || !strings.Contains(logs, "logger=") {
		t.Errorf("the session did not run its forgery: %s", logs)
	}
}

// str is v as a string ("" for none).
func str(v any) string { s, _ := v.(string); return s }

// TestAuditSession (issue 41): mosaic audit of a session that was granted
// a host and had it taken back, changed a file, was stopped and whose
// change was applied: its events in time order, each once, with stable
// ids; the session's forged grant (printed and sent to journald) is not
// among them.
func TestAuditSession(t *testing.T) {
	needRig(t)
	ws := cloneRepo(t)
	name := cloneSession(t)
	forge := "MESSAGE_ID=" + journald.EgressGrant + "\nSYSLOG_IDENTIFIER=mosaic-audit\nMOSAIC_SESSION=" + name + "\nMOSAIC_EVENT=egress-grant\nMOSAIC_ENTRY=forged.example:443\nMESSAGE=forged\n"
	script := `echo b > b.txt; curl -s -o /dev/null https://refused.example/; printf '%s' "$1"; printf '%s' "$1" | logger --journald 2>/dev/null; exec sleep 60`
	mustMosaic(t, "start", "--clone", "--name", name, "-w", ws, "--allow-host", "example.com", "--", "sh", "-c", script, "sh", forge)
	eventually(t, 10*time.Second, "the refusal of refused.example", func() bool {
		return len(journalEvents(t, "MESSAGE_ID="+journald.EgressRefused, "MOSAIC_SESSION="+name)) > 0
	})
	mustMosaic(t, "allow", name, "example.org")
	mustMosaic(t, "deny", name, "example.org")
	mustMosaic(t, "stop", "--timeout", "1s", name)
	mustMosaic(t, "apply", name)
	type event struct {
		ID, Event, Message string
		Fields             map[string]string
	}
	var events []event
	eventually(t, 10*time.Second, "the audit to hold the grant, revocation and apply", func() bool {
		events = nil
		for _, line := range strings.Split(strings.TrimSpace(mustMosaic(t, "audit", "--json", name).stdout), "\n") {
			var e event
			if json.Unmarshal([]byte(line), &e) != nil {
				t.Fatalf("audit --json line is not JSON: %q", line)
			}
			events = append(events, e)
		}
		if len(events) < 7 {
			var k []string
			for _, e := range events {
				k = append(k, e.Event)
			}
			t.Logf("audit so far: %v", k)
		}
		return len(events) >= 7
	})
	var kinds []string
	ids := map[string]bool{}
	for _, e := range events {
		kinds = append(kinds, e.Event)
		if e.ID == "" || ids[e.ID] {
			t.Errorf("event without an id of its own: %+v", e)
		}
		ids[e.ID] = true
		if e.Event != "session-start" && strings.Contains(e.Message, "forged") || e.Fields["entry"] == "forged.example:443" {
			t.Errorf("the session's forged event is in its audit: %+v", e)
		}
	}
	want := "session-start egress-refused egress-grant egress-revoke session-end change change-applied"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("audit events: %s\nwant %s", got, want)
	}
	if s := events[0].Fields; s["workspace_mode"] != "clone" || !strings.Contains(s["by"], "mosaic start") {
		t.Errorf("start event: %+v", s)
	}
	if f := events[1].Fields; f["host"] != "refused.example" || f["port"] != "443" || f["reason"] == "" {
		t.Errorf("refusal event: %+v", f)
	}
	if by := events[2].Fields["by"]; !strings.Contains(by, "uid ") {
		t.Errorf("grant without who gave it: %+v", events[2].Fields)
	}
	if out := mustMosaic(t, "audit", name).stdout; !strings.Contains(out, "egress-grant") || strings.Contains(out, "forged.example:443,") {
		t.Errorf("audit's text:\n%s", out)
	}
	mustMosaic(t, "rm", name)
}
