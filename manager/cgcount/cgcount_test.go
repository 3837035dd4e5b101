package cgcount

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const manager = "/user.slice/user-1000.slice/user@1000.service"

func unitDir(t *testing.T, root, unit string, files map[string]string) {
	t.Helper()
	dir := filepath.Join(root, manager, "mosaic.slice", unit)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRead(t *testing.T) {
	root := t.TempDir()
	unitDir(t, root, "mosaic-a.service", map[string]string{
		"memory.current": "1486848\n",
		"pids.current":   "3\n",
		"cpu.stat":       "usage_usec 21713\nuser_usec 13034\nsystem_usec 8679\nnr_periods 0\n",
	})
	c := Read(root, manager, "mosaic.slice", "mosaic-a.service")
	if c.MemoryBytes == nil || *c.MemoryBytes != 1486848 || c.Tasks == nil || *c.Tasks != 3 || c.CPUNSec == nil || *c.CPUNSec != 21713000 {
		t.Errorf("%+v", c)
	}
}

// TestReadNone: a controller's file missing, a value that is no number, a
// unit that has no cgroup (ended): none, never zero.
func TestReadNone(t *testing.T) {
	root := t.TempDir()
	unitDir(t, root, "mosaic-b.service", map[string]string{
		"pids.current": "max\n",
		"cpu.stat":     "user_usec 1\n",
	})
	for _, unit := range []string{"mosaic-b.service", "mosaic-gone.service"} {
		if c := Read(root, manager, "mosaic.slice", unit); c.MemoryBytes != nil || c.Tasks != nil || c.CPUNSec != nil {
			t.Errorf("%s: %+v", unit, c)
		}
	}
}

// TestReadBounded: a name or cgroup that would leave the unit's directory
// reads nothing, and a file is read only up to maxFile.
func TestReadBounded(t *testing.T) {
	root := t.TempDir()
	unitDir(t, root, "mosaic-c.service", map[string]string{"pids.current": "7\n"})
	// What a path outside the slice would find.
	if err := os.WriteFile(filepath.Join(root, manager, "pids.current"), []byte("9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ cg, slice, unit string }{
		{manager, "mosaic.slice", ".."},
		{manager, "..", "mosaic.slice"},
		{manager, "mosaic.slice", "../x"},
		{manager + "/mosaic.slice/..", "mosaic.slice", "mosaic-c.service"},
		{"user.slice", "mosaic.slice", "mosaic-c.service"},
		{manager, "mosaic.slice", ""},
	} {
		if c := Read(root, tc.cg, tc.slice, tc.unit); c.Tasks != nil {
			t.Errorf("%+v read %d", tc, *c.Tasks)
		}
	}
	unitDir(t, root, "mosaic-d.service", map[string]string{"cpu.stat": strings.Repeat("x", maxFile) + "\nusage_usec 5\n"})
	if c := Read(root, manager, "mosaic.slice", "mosaic-d.service"); c.CPUNSec != nil {
		t.Errorf("read past %d bytes: %d", maxFile, *c.CPUNSec)
	}
}
