package journald

import (
	"bufio"
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestEncode: plain values are KEY=VALUE lines, a value with a newline is
// sent with its length, and a key a client may not write is refused.
func TestEncode(t *testing.T) {
	got, err := Encode([]Field{{"MESSAGE", "one"}, {"MOSAIC_X", "a\nb"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "MESSAGE=one\nMOSAIC_X\n\x03\x00\x00\x00\x00\x00\x00\x00a\nb\n"
	if string(got) != want {
		t.Errorf("Encode = %q, want %q", got, want)
	}
	for _, k := range []string{"_SYSTEMD_USER_UNIT", "lower", "A-B", "", "1X"} {
		if _, err := Encode([]Field{{k, "v"}}); err == nil {
			t.Errorf("key %q accepted", k)
		}
	}
}

// TestCatalogNamesEveryEvent: every MESSAGE_ID of the code has one entry
// in mosaic.catalog, with a subject, and the catalog has no other.
func TestCatalogNamesEveryEvent(t *testing.T) {
	b, err := os.ReadFile("mosaic.catalog")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	head := regexp.MustCompile(`^-- ([0-9a-f]{32})$`)
	sc := bufio.NewScanner(bytes.NewReader(b))
	var last string
	for sc.Scan() {
		if m := head.FindStringSubmatch(sc.Text()); m != nil {
			if ids[m[1]] {
				t.Errorf("%s is in the catalog twice", m[1])
			}
			ids[m[1]], last = true, m[1]
		} else if strings.HasPrefix(sc.Text(), "-- ") {
			t.Errorf("catalog line %q is not -- and a 32-digit hex ID", sc.Text())
		} else if last != "" && strings.HasPrefix(sc.Text(), "Subject: ") {
			last = ""
		}
	}
	for _, id := range IDs {
		if !ids[id] {
			t.Errorf("MESSAGE_ID %s has no catalog entry", id)
		}
		delete(ids, id)
	}
	if len(ids) > 0 {
		t.Errorf("the catalog names IDs the code does not: %v", ids)
	}
}
