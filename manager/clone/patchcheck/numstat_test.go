package patchcheck

import "testing"

// TestParseNumstat reads git's numstat of a large change, binary files
// and host-run files included, and refuses what git never writes.
func TestParseNumstat(t *testing.T) {
	s, err := ParseNumstat([]byte("1\t0\ta.txt\x00-\t-\tbig.bin\x003\t2\tMakefile\x00"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Files) != 3 || s.Added != 4 || s.Deleted != 2 || !s.Files[1].Binary || s.Files[2].HostRun == "" {
		t.Errorf("summary: %+v", s)
	}
	for _, bad := range []string{"1\t0\x00", "x\t0\ta\x00", "1\t0\t../etc/passwd\x00", "1\t0\t.git/config\x00"} {
		if _, err := ParseNumstat([]byte(bad)); err == nil {
			t.Errorf("%q was read", bad)
		}
	}
}
