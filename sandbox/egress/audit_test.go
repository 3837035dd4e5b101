package egress

import (
	"sync"
	"testing"
	"time"

	"mosaic/internal/journald"
)

// TestAuditEvents: a grant, a revocation and an expiry each write one
// audit event with its MESSAGE_ID, the session, the entry and who gave it.
func TestAuditEvents(t *testing.T) {
	lt := newLiveTest(t)
	var mu sync.Mutex
	var got []map[string]string
	lt.e.Audit = func(fs []journald.Field) {
		m := map[string]string{}
		for _, f := range fs {
			m[f.Key] = f.Value
		}
		if _, err := journald.Encode(fs); err != nil {
			t.Errorf("an event journald would not take: %v", err)
		}
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}
	target := "brief.test:" + lt.port
	if _, err := lt.e.grant([]string{target}, 0, "uid 1000 pid 42 (mosaic)"); err != nil {
		t.Fatal(err)
	}
	if _, err := lt.e.deny([]string{target}, "uid 1000 pid 43 (mosaic)"); err != nil {
		t.Fatal(err)
	}
	g, err := lt.e.grant([]string{target}, time.Hour, "uid 1000 pid 44 (mosaic)")
	if err != nil {
		t.Fatal(err)
	}
	lt.e.live.mu.Lock()
	lg := lt.e.live.grants[g[0].Entry]
	lt.e.live.mu.Unlock()
	lg.timer.Stop()
	lt.e.expire(lg)

	mu.Lock()
	defer mu.Unlock()
	want := []struct{ id, event, by string }{
		{journald.EgressGrant, "egress-grant", "uid 1000 pid 42 (mosaic)"},
		{journald.EgressRevoke, "egress-revoke", "uid 1000 pid 43 (mosaic)"},
		{journald.EgressGrant, "egress-grant", "uid 1000 pid 44 (mosaic)"},
		{journald.EgressExpire, "egress-expire", "uid 1000 pid 44 (mosaic)"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d audit events, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		e := got[i]
		if e["MESSAGE_ID"] != w.id || e["MOSAIC_EVENT"] != w.event || e["MOSAIC_BY"] != w.by || e["MOSAIC_SESSION"] != "s1" ||
			e["MOSAIC_ENTRY"] != target || e["SYSLOG_IDENTIFIER"] != journald.Identifier || e["MESSAGE"] == "" {
			t.Errorf("event %d: %v, want %s %s by %s of %s", i, e, w.event, w.id, w.by, target)
		}
	}
	if got[2]["MOSAIC_UNTIL"] == "until the session ends" || got[0]["MOSAIC_UNTIL"] != "until the session ends" {
		t.Errorf("MOSAIC_UNTIL: %q and %q", got[0]["MOSAIC_UNTIL"], got[2]["MOSAIC_UNTIL"])
	}
}
