package units

import (
	"testing"
)

func TestDefaults(t *testing.T) {
	h := Host{RAM: 16 << 30, CPUs: 4}
	if s := SessionDefaults(h); s.MemoryMax != 8<<30 || s.TasksMax != 4096 || s.CPUQuota != 300 {
		t.Errorf("session defaults %+v", s)
	}
	if s := SliceDefaults(h); s.MemoryMax != 12<<30 || s.CPUQuota != 360 {
		t.Errorf("slice defaults %+v", s)
	}
	if s := SessionDefaults(Host{RAM: 1 << 30, CPUs: 1}); s.CPUQuota != 100 {
		t.Errorf("one CPU: quota %d, want at least one CPU", s.CPUQuota)
	}
	l := Limits{MemoryMax: Infinity}.Or(SessionDefaults(h))
	if l.MemoryMax != Infinity || l.TasksMax != 4096 {
		t.Errorf("Or %+v", l)
	}
	var q uint64
	for _, p := range limitProperties(Limits{CPUQuota: Infinity}) {
		q = p.Value.Value().(uint64)
	}
	if q != Infinity {
		t.Errorf("CPUQuota infinity sent as %d", q)
	}
	found := 0
	for _, p := range egressProperties(session{Spec: Spec{Name: "x", MosaicBin: "/m", EgressDir: "/e"}}) {
		if p.Name == "MemoryMax" || p.Name == "TasksMax" || p.Name == "CPUQuotaPerSecUSec" {
			found++
		}
	}
	if found != 3 {
		t.Errorf("the egress proxy has %d of its 3 limits", found)
	}
	if _, err := ParseSize("memory-max", "infinity"); err != nil {
		t.Error(err)
	}
}
