package audit

import (
	"testing"
	"time"

	"mosaic/internal/journald"
	"mosaic/manager/clone/patchcheck"
	"mosaic/manager/records"
)

// TestTrusted: an event counts only from the unit its kind's writer runs
// as, through journald's native protocol, with mosaic's identifier.
func TestTrusted(t *testing.T) {
	grant := map[string]string{"MESSAGE_ID": journald.EgressGrant, "SYSLOG_IDENTIFIER": journald.Identifier, "_TRANSPORT": "journal",
		"MOSAIC_SESSION": "s", "_SYSTEMD_USER_UNIT": "mosaic-s-egress.service"}
	if !Trusted(grant, "s") {
		t.Error("the proxy's grant is not trusted")
	}
	for _, change := range []func(map[string]string){
		func(e map[string]string) { e["_SYSTEMD_USER_UNIT"] = "mosaic-s.service" },        // the session itself
		func(e map[string]string) { e["_SYSTEMD_USER_UNIT"] = "mosaic-t-egress.service" }, // another session's proxy
		func(e map[string]string) { e["_TRANSPORT"] = "stdout" },                          // a printed line
		func(e map[string]string) { e["MOSAIC_SESSION"] = "t" },
		func(e map[string]string) { e["MESSAGE_ID"] = "00000000000000000000000000000000" },
	} {
		e := map[string]string{}
		for k, v := range grant {
			e[k] = v
		}
		change(e)
		if Trusted(e, "s") {
			t.Errorf("trusted: %v", e)
		}
	}
	launch := map[string]string{"MESSAGE_ID": journald.BusLaunch, "SYSLOG_IDENTIFIER": journald.Identifier, "_TRANSPORT": "journal",
		"MOSAIC_SESSION": "child", "MOSAIC_PARENT": "s", "_SYSTEMD_USER_UNIT": "mosaic-bus.service"}
	if !Trusted(launch, "s") || !Trusted(launch, "child") || Trusted(launch, "x") {
		t.Error("a bus launch is not in both sessions' audits, or is in another's")
	}
}

// TestFromRecordsInOrder: start, change and end from the records, merged
// with journal events by time, each with an id that stays the same.
func TestFromRecordsInOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	rec := records.Record{Name: "s", Started: t0, Description: records.Description{Profile: "generic", Network: "allow", WorkspaceCopied: true, Command: []string{"sh"}}}
	snap := t0.Add(2 * time.Minute)
	cl := &records.Clone{Base: "abc", Snapshot: &snap, Summary: &patchcheck.Summary{Files: []patchcheck.File{{Path: "Makefile", HostRun: "make runs it"}, {Path: "a"}}, Added: 3}}
	end := &records.End{Result: "success", ExitCode: "exited", ExitStatus: "0", Ended: t0.Add(time.Minute)}
	ev := FromRecords(rec, end, cl)
	grant := Event{Time: t0.Add(30 * time.Second), Event: "egress-grant", ID: "g"}
	got := Merge(append(ev, grant))
	want := []string{KindStart, "egress-grant", KindEnd, KindChange}
	for i, w := range want {
		if got[i].Event != w {
			t.Fatalf("event %d is %s, want %s: %+v", i, got[i].Event, w, got)
		}
	}
	if got[0].Fields["workspace_mode"] != "clone" || got[0].Fields["base"] != "abc" || got[3].Fields["host_run"] != "Makefile" {
		t.Errorf("fields: %+v %+v", got[0].Fields, got[3].Fields)
	}
	if again := FromRecords(rec, end, cl); again[0].ID != ev[0].ID || ev[0].ID == ev[1].ID {
		t.Error("record events' ids are not stable and distinct")
	}
}
