package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPinBinaries(t *testing.T) {
	ws := "/home/u/src/mosaic"
	b := pinBinaries([]string{"/home/u/other", ws}, pin{ws + "/bin/x/mosaic", "mosaic"})
	want := []string{"bind " + ws + "/bin", "bind " + ws + "/bin/x", "ro-bind " + ws + "/bin/x/mosaic"}
	if len(b) != len(want) {
		t.Fatalf("pinBinaries = %+v", b)
	}
	for i, w := range want {
		if got := b[i].Kind + " " + b[i].Dst; got != w || b[i].Src != b[i].Dst || b[i].Reason == "" {
			t.Errorf("bind %d = %+v, want %s at its own path with a reason", i, b[i], w)
		}
	}
	if b := pinBinaries([]string{ws}, pin{"/usr/bin/mosaic", "mosaic"}); b != nil {
		t.Errorf("a binary no writable bind holds is pinned: %+v", b)
	}
	// mosaic and its stage binary side by side: their directories bound
	// once, and before either binary (a directory bound after a binary
	// would cover it).
	b = pinBinaries([]string{ws}, pin{ws + "/bin/mosaic", "mosaic"}, pin{ws + "/bin/mosaic-stage", "stage"}, pin{ws + "/bin/x/bwrap", "bwrap"})
	want = []string{"bind " + ws + "/bin", "bind " + ws + "/bin/x", "ro-bind " + ws + "/bin/mosaic", "ro-bind " + ws + "/bin/mosaic-stage", "ro-bind " + ws + "/bin/x/bwrap"}
	if len(b) != len(want) {
		t.Fatalf("pinBinaries of three = %+v", b)
	}
	for i, w := range want {
		if got := b[i].Kind + " " + b[i].Dst; got != w {
			t.Errorf("bind %d = %s, want %s", i, got, w)
		}
	}
	// After every other bind.
	o := Options{Workspace: ws, Home: "/home/u", SessionHome: "/s/home", MosaicBin: ws + "/mosaic", StageBin: ws + "/mosaic-stage", BwrapBin: "/usr/bin/bwrap",
		ExtraRW: []string{"/data"}, Protect: []Bind{{Kind: KindRO, Src: ws + "/.git/config", Dst: ws + "/.git/config", Reason: "r"}}}
	all := Binds(o, os.Lstat, os.Readlink)
	if last := all[len(all)-1]; last.Dst != ws+"/mosaic-stage" || last.Kind != KindRO {
		t.Errorf("last bind %+v, want the stage binary read-only", last)
	}
	if m := all[len(all)-2]; m.Dst != ws+"/mosaic" || m.Kind != KindRO {
		t.Errorf("last but one bind %+v, want the mosaic binary read-only", m)
	}
	if p := all[len(all)-3]; p.Dst != ws+"/.git/config" {
		t.Errorf("the protected entries are not after the workspace and --rw: %+v", p)
	}
}

func TestStatNoFollow(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	os.Symlink("d", filepath.Join(dir, "l"))
	if _, err := StatNoFollow(filepath.Join(dir, "d")); err != nil {
		t.Error(err)
	}
	for _, p := range []string{filepath.Join(dir, "l"), filepath.Join(dir, "l", "x"), "relative", dir + "/d/../d"} {
		if _, err := StatNoFollow(p); err == nil {
			t.Errorf("StatNoFollow(%s) followed or took it", p)
		}
	}
}

// TestEmptyDir: only a directory with no entry at all is empty; a
// hidden file, a missing path and a file are not.
func TestEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if !EmptyDir(dir) {
		t.Errorf("EmptyDir(empty %s) = false", dir)
	}
	file := filepath.Join(dir, ".hidden")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, file, filepath.Join(dir, "missing")} {
		if EmptyDir(p) {
			t.Errorf("EmptyDir(%s) = true", p)
		}
	}
}
