package sessionfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRemove(t *testing.T) {
	rt := t.TempDir()
	p := Path(rt, "s1")
	os.MkdirAll(filepath.Dir(p), 0o700)
	os.WriteFile(p, []byte("A=\"x y\"\n"), 0o600)
	if err := Remove(p); err != nil {
		t.Errorf("Remove: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(p)); err == nil {
		t.Error("file or its directory still there")
	}
	if err := Remove(p); err != nil {
		t.Errorf("removing it twice: %v", err)
	}
	for _, bad := range []string{"/etc/passwd", filepath.Join(rt, "env"), filepath.Join(rt, "mosaic", "credentials", "s", "..", "env"),
		"relative/mosaic/credentials/s/env", filepath.Join(rt, "mosaic", "credentials", "s", "other")} {
		if err := Remove(bad); err == nil {
			t.Errorf("Remove(%q) accepted", bad)
		}
	}
}
