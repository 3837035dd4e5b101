package doctor

import (
	"os"
	"strings"
	"testing"
)

// Root is never told to make root linger (issue 30).
func TestLingerCheckRoot(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the root case needs root")
	}
	c := lingerCheck()
	if strings.Contains(c.Fix+c.Detail, "enable-linger") || c.Status == "ok" {
		t.Errorf("root: %+v", c)
	}
}

// No journal file of a uid's: journalctl's empty answer is not an ok.
func TestUserJournalExists(t *testing.T) {
	if userJournalExists(2147480000) {
		t.Error("a journal file for a uid nobody has")
	}
}
