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
		edit  func(*Spec, *Launch)
		wants bool
	}{
		{"start", func(*Spec, *Launch) {}, true},
		{"one-shot run, name made up", func(_ *Spec, l *Launch) { l.Stdio = stdio }, false},
		{"one-shot run, named", func(s *Spec, l *Launch) { l.Stdio, s.NameGiven = stdio, true }, true},
		{"start --pty", func(_ *Spec, l *Launch) { l.Stdio, l.Attach = stdio, &fd }, true},
	} {
		s, l := testSpec(), Launch{}
		c.edit(&s, &l)
		_, post := props(Render(s, l, Features{}).Properties)["ExecStopPost"]
		if EndRecorded(s, l) != c.wants || post != c.wants {
			t.Errorf("%s: EndRecorded %v, ExecStopPost %v, want %v", c.name, EndRecorded(s, l), post, c.wants)
		}
	}
	s := testSpec()
	s.Scope = true
	if EndRecorded(s, Launch{}) {
		t.Error("a scope mosaic named records its end")
	}
	if s.NameGiven = true; !EndRecorded(s, Launch{}) {
		t.Error("a named scope records no end")
	}
}
