package egress

import (
	"io"
	"strings"
	"testing"

	"mosaic/sandbox/netstack"
)

// TestResolve: the session's DNS may give out an address for a name some
// entry names on any port (the default 443, another port, a mirror's plain
// port) and for none other; a refusal is recorded with the name alone and
// the line that grants it. The request is the one the stack sends.
func TestResolve(t *testing.T) {
	if resolveMethod != netstack.ResolveMethod {
		t.Fatalf("the proxy answers %q, the stack asks %q", resolveMethod, netstack.ResolveMethod)
	}
	dial, _ := egressTest(t, []string{"allowed.test", "db.test:5432"}, nil)
	ask := func(name string) string {
		c := dial()
		defer c.Close()
		io.WriteString(c, resolveMethod+" / HTTP/1.1\r\nHost: "+name+"\r\n\r\n")
		b, _ := io.ReadAll(c)
		return string(b)
	}
	for name, want := range map[string]string{
		"allowed.test":   " 200 ",
		"ALLOWED.test.":  " 200 ",
		"db.test":        " 200 ",
		"other.test":     "mosaic allow s1 other.test[:PORT]",
		"db":             " 403 ",
		"allowed.test.x": " 403 ",
		"bad name":       " 400 ",
	} {
		if got := ask(name); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
