package main

import "testing"

func TestParseDropped(t *testing.T) {
	lines := "Suppressed 1200 messages from user@1000.service\nSuppressed 5 messages from cron.service\nSuppressed 30 messages from user@1000.service\nsomething else\n"
	if got := parseDropped(lines, "user@1000.service"); got != 1230 {
		t.Errorf("parseDropped = %d, want 1230", got)
	}
	if got := parseDropped("", "user@1000.service"); got != 0 {
		t.Errorf("parseDropped of nothing = %d", got)
	}
}
