package records

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A damaged record keeps the JSON decoder's error as its cause: a caller
// can ask errors.As for the *json.SyntaxError (its offset), and the line is
// the one it was. Checked to bite: with the site back at %v, errors.As is
// false.
func TestDamagedRecordKeepsItsCause(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, recordFile), []byte(`{"name": "x",`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadChecked(dir)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("%v: errors.As finds no *json.SyntaxError", err)
	}
	if want := recordFile + " is damaged: " + se.Error(); err.Error() != want || !strings.Contains(want, "unexpected end of JSON input") {
		t.Errorf("message %q, want %q", err, want)
	}
}
