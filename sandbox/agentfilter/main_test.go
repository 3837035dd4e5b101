package agentfilter

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh"
)

// TestSpecRoundTrip: a Lent survives the unit's command line, and a
// malformed one is refused.
func TestSpecRoundTrip(t *testing.T) {
	r := newRig(t)
	for _, l := range r.filter.Lent {
		got, err := ParseSpec(l.Spec())
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec() != l.Spec() || got.SignOnly != l.SignOnly || len(got.Dests) != len(l.Dests) {
			t.Fatalf("%+v became %+v", l, got)
		}
	}
	for _, bad := range []string{"", "sign", "login,AAAA", "sign,!!", "sign,AAAA,x=y", "other,AAAA"} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestParseDest: a host:port's keys come from its [host]:port lines only.
func TestParseDest(t *testing.T) {
	r := newRig(t)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	line := func(host string, k ssh.PublicKey) string { return host + " " + string(ssh.MarshalAuthorizedKey(k)) }
	if err := os.WriteFile(kh, []byte(line("[git.example]:2222", r.hostA.PublicKey())+line("git.example", r.hostB.PublicKey())), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := ParseDest("git.example:2222", []string{kh})
	if err != nil || len(d.Keys) != 1 || !d.hasKey(r.hostA.PublicKey()) || d.hasKey(r.hostB.PublicKey()) {
		t.Fatalf("%+v %v", d, err)
	}
	if d, err := ParseDest("git.example", []string{kh}); err != nil || !d.hasKey(r.hostB.PublicKey()) || d.hasKey(r.hostA.PublicKey()) {
		t.Fatalf("%+v %v", d, err)
	}
	for _, bad := range []string{"other.example", "git.example:99999", "*.example", "git.example:22,x"} {
		if _, err := ParseDest(bad, []string{kh}); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
