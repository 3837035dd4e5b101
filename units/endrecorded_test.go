package units

import "testing"

// TestEndRecorded: a session records its end exactly when its unit has the
// ended stage (a service's ExecStopPost), or mosaic named its scope; the
// state directory keeps room for end.json by the same test (statedir).
func TestEndRecorded(t *testing.T) {
	fd := 0
	stdio := &[3]int{}
	for _, c := range []struct {
		name  string
		edit  func(*Spec)
		wants bool
	}{
		{"start", func(*Spec) {}, true},
		{"one-shot run, name made up", func(s *Spec) { s.Stdio = stdio }, false},
		{"one-shot run, named", func(s *Spec) { s.Stdio, s.NameGiven = stdio, true }, true},
		{"start --pty", func(s *Spec) { s.Stdio, s.Attach = stdio, &fd }, true},
	} {
		s := testSpec()
		c.edit(&s)
		_, post := props(Properties(s, Features{}))["ExecStopPost"]
		if s.EndRecorded() != c.wants || post != c.wants {
			t.Errorf("%s: EndRecorded %v, ExecStopPost %v, want %v", c.name, s.EndRecorded(), post, c.wants)
		}
	}
	s := testSpec()
	s.Scope = true
	if s.EndRecorded() {
		t.Error("a scope mosaic named records its end")
	}
	if s.NameGiven = true; !s.EndRecorded() {
		t.Error("a named scope records no end")
	}
}
