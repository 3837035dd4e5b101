package credvar

import (
	"regexp"
	"testing"
)

// IsName is the loop that replaced the pattern ^[A-Za-z_][A-Za-z0-9_]*$.
func TestIsVarName(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	for _, s := range []string{"", "A", "_", "a1", "1a", "A_B_9", "_9", "9", "A-B", "A B", "é", "A\n", "A=B", "Z", "z", "@", "[", "`", "{", "/", ":"} {
		if got, want := IsName(s), pattern.MatchString(s); got != want {
			t.Errorf("IsName(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}
