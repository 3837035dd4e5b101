package manager

import (
	"os"
	"path/filepath"
	"testing"

	"mosaic/manager/request"
)

// A set-property drop-in of mosaic.slice with a limit spares the Gets; one
// that says infinity, or none, does not.
func TestLimitedOnDisk(t *testing.T) {
	root := t.TempDir()
	p := request.Paths{RuntimeDir: filepath.Join(root, "run"), Config: filepath.Join(root, "config")}
	write := func(dir, name, text string) {
		d := filepath.Join(root, dir, "systemd", "user.control", "mosaic.slice.d")
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name), []byte("# created via systemctl set-property\n[Slice]\n"+text+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if limitedOnDisk(p) {
		t.Error("limited with no drop-in")
	}
	write("run", "50-MemoryMax.conf", "MemoryMax=infinity")
	write("run", "50-CPUWeight.conf", "CPUWeight=50")
	if limitedOnDisk(p) {
		t.Error("limited by MemoryMax=infinity or CPUWeight")
	}
	write("config", "50-TasksMax.conf", "TasksMax=100")
	if !limitedOnDisk(p) {
		t.Error("not limited by the user's persistent TasksMax=100")
	}
}
