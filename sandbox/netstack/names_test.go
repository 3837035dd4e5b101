package netstack

import (
	"fmt"
	"net/netip"
	"testing"
)

// TestNamesForgetTheLeastRecent: a full table forgets the name least
// recently answered (a connection to its address is then to an address,
// which the proxy refuses) and gives the new name an address never given
// before; a name answered again keeps its place and its address. Past the
// last address of 240/4 it starts again, skipping those still held.
func TestNamesForgetTheLeastRecent(t *testing.T) {
	n := newNames()
	first := n.addr("n0.test")
	for i := 1; i < maxNames; i++ {
		n.addr(fmt.Sprintf("n%d.test", i))
	}
	if again := n.addr("n0.test"); again != first {
		t.Fatalf("n0 again: %v, want %v", again, first)
	}
	second := n.addr("n1.test") // n1 now most recent too
	fresh := n.addr("new.test")
	if got := n.target(first, 443); got != "n0.test:443" {
		t.Errorf("n0, answered again, was forgotten: %s", got)
	}
	if got := n.target(second, 443); got != "n1.test:443" {
		t.Errorf("n1, answered again, was forgotten: %s", got)
	}
	forgot := netip.MustParseAddr("240.0.1.2") // n2's, the least recent
	if got := n.target(forgot, 443); got != "240.0.1.2:443" {
		t.Errorf("the least recent name is still held: %s", got)
	}
	if fresh == forgot || n.order.Len() != maxNames {
		t.Errorf("new name at %v (forgot %v), table %d", fresh, forgot, n.order.Len())
	}
	n.next = lastName
	if a := n.addr("last.test"); a != lastName {
		t.Errorf("at the end: %v", a)
	}
	if a := n.addr("wrapped.test"); a == first || a == second || !a.Is4() || a.As4()[0] != 240 {
		t.Errorf("after the end: %v, want one of 240.0.1.0 up not held", a)
	}
}
