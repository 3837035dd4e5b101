package credentials

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"mosaic/internal/errcode"
)

// A missing --env-file keeps what the file system said as its cause: a
// caller can ask errors.Is(err, fs.ErrNotExist), while the code and the
// line the user reads are what they were. Checked to bite: with the site
// back at %v, errors.Is is false.
func TestEnvFileMissingKeepsItsCause(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.env")
	_, err := ReadEnvFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%v: errors.Is(err, fs.ErrNotExist) is false", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != path {
		t.Errorf("%v: errors.As finds no *fs.PathError of %s", err, path)
	}
	e := errcode.Of(err)
	if want := "--env-file " + path + ": open " + path + ": no such file or directory"; e.Code != errcode.CredentialFileMissing.Name || e.Message != want {
		t.Errorf("code %s, message %q; want %s, %q", e.Code, e.Message, errcode.CredentialFileMissing.Name, want)
	}
}
