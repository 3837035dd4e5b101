package stagebin

import (
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDiffer: two builds agree when their Go, main module, settings and the
// stage's modules (a subset of mosaic's) agree; any one of those apart is
// named.
func TestDiffer(t *testing.T) {
	info := func(edit func(*debug.BuildInfo)) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Path: "mosaic/cmd/mosaic", Main: debug.Module{Path: "mosaic", Version: "(devel)"},
			Deps:     []*debug.Module{{Path: "golang.org/x/sys", Version: "v0.30.0", Sum: "h1:a"}, {Path: "github.com/godbus/dbus/v5", Version: "v5.1.0", Sum: "h1:b"}},
			Settings: []debug.BuildSetting{{Key: "-tags", Value: "urfave_cli_no_docs"}, {Key: "-ldflags", Value: "-X main.commit=abc"}, {Key: "vcs.modified", Value: "false"}}}
		if edit != nil {
			edit(bi)
		}
		return bi
	}
	mosaic := info(nil)
	stage := info(func(bi *debug.BuildInfo) { bi.Path, bi.Deps = "mosaic/cmd/mosaic-stage", bi.Deps[:1] })
	if why := differ(mosaic, stage); why != "" {
		t.Errorf("a pair of one build differs: %s", why)
	}
	for _, tc := range []struct {
		edit func(*debug.BuildInfo)
		want string
	}{
		{func(bi *debug.BuildInfo) { bi.GoVersion = "go1.26.7" }, "go1.26.7"},
		{func(bi *debug.BuildInfo) { bi.Main.Version = "v0.9.0" }, "v0.9.0"},
		{func(bi *debug.BuildInfo) { bi.Settings[0].Value = "urfave_cli_no_docs,mosaic_weakened" }, "-tags"},
		{func(bi *debug.BuildInfo) { bi.Settings[1].Value = "-X main.commit=def" }, "-ldflags"},
		{func(bi *debug.BuildInfo) { bi.Settings = bi.Settings[:2] }, "vcs.modified"},
		{func(bi *debug.BuildInfo) {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: "vcs.revision", Value: "0123"})
		}, "vcs.revision"},
		{func(bi *debug.BuildInfo) {
			bi.Deps = []*debug.Module{{Path: "golang.org/x/sys", Version: "v0.29.0", Sum: "h1:c"}}
		}, "golang.org/x/sys v0.29.0"},
	} {
		other := info(func(bi *debug.BuildInfo) { bi.Deps = bi.Deps[:1]; tc.edit(bi) })
		if why := differ(mosaic, other); !strings.Contains(why, tc.want) {
			t.Errorf("differ = %q, want it to name %q", why, tc.want)
		}
	}
	if why := differ(nil, stage); why == "" {
		t.Error("a mosaic without build information takes any stage binary")
	}
}

// A check that passed is kept (the stage binary's build information is not
// read again while the file and mosaic's build are the ones checked), and
// anything else is read and checked again: the file rewritten in place,
// replaced, or another mosaic; a refusal is never kept.
func TestFindKeepsOnlyAPass(t *testing.T) {
	dir := t.TempDir()
	mosaic, stage, cache := filepath.Join(dir, "mosaic"), filepath.Join(dir, Name), filepath.Join(dir, "run", "stage-checked")
	if err := os.WriteFile(stage, []byte("one build"), 0o755); err != nil {
		t.Fatal(err)
	}
	ours := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "mosaic", Version: "(devel)"}}
	theirs := *ours
	reads := 0
	orig := readInfo
	readInfo = func(*os.File) (*debug.BuildInfo, error) { reads++; bi := theirs; return &bi, nil }
	keySettle = 0
	t.Cleanup(func() { readInfo, keySettle = orig, 3*time.Second })
	find := func(ours *debug.BuildInfo, wantReads int, wantErr bool) {
		t.Helper()
		_, keepCheck, err := Find(mosaic, ours, cache)
		keepCheck()
		if (err != nil) != wantErr || reads != wantReads {
			t.Fatalf("Find: %v after %d reads of the build information; want an error %v after %d", err, reads, wantErr, wantReads)
		}
	}
	find(ours, 1, false) // checked and kept
	find(ours, 1, false) // taken from the cache
	// Rewritten in place with another build: another mtime, ctime and size.
	theirs.GoVersion = "go1.26.7"
	if err := os.WriteFile(stage, []byte("another build"), 0o755); err != nil {
		t.Fatal(err)
	}
	find(ours, 2, true)
	find(ours, 3, true) // the refusal was not kept
	// Replaced by one of this build again, then checked by another mosaic.
	theirs.GoVersion = ours.GoVersion
	if err := os.Remove(stage); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stage, []byte("one build"), 0o755); err != nil {
		t.Fatal(err)
	}
	find(ours, 4, false)
	find(ours, 4, false)
	other := *ours
	other.Main.Version = "v0.9.0"
	find(&other, 5, true)
	// A file changed within keySettle of its check is checked each time.
	keySettle = time.Hour
	if err := os.Remove(cache); err != nil {
		t.Fatal(err)
	}
	find(ours, 6, false)
	find(ours, 7, false)
}

// TestFindKeysTheFileItRead: the check kept is keyed by the file whose build
// information was read. A stage path that is a link retargeted, between the
// lookup that keys the check and the read, from a stage of another build to
// one of this build (an upgrade that flips a link, or anyone racing it) had
// the other build's stage pass from the cache at every later start, though
// a refusal is never kept. The link is flipped from the read itself, the
// moment the race needs; before the fix Find stat'ed the path and read it
// again by name, and the second Find passed.
func TestFindKeysTheFileItRead(t *testing.T) {
	dir := t.TempDir()
	mosaic, stage, cache := filepath.Join(dir, "mosaic"), filepath.Join(dir, Name), filepath.Join(dir, "run", "stage-checked")
	other, this := filepath.Join(dir, "other-build"), filepath.Join(dir, "this-build")
	for p, b := range map[string]string{other: "other build", this: "this build"} {
		if err := os.WriteFile(p, []byte(b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	point := func(to string) {
		t.Helper()
		_ = os.Remove(stage + ".new")
		if err := os.Symlink(to, stage+".new"); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(stage+".new", stage); err != nil {
			t.Fatal(err)
		}
	}
	point(other)
	ours := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "mosaic", Version: "(devel)"}}
	orig, flipped := readInfo, false
	readInfo = func(f *os.File) (*debug.BuildInfo, error) {
		if !flipped {
			flipped = true
			point(this)
		}
		b, err := io.ReadAll(f)
		if err != nil {
			return nil, err
		}
		bi := *ours
		if string(b) == "other build" {
			bi.GoVersion = "go1.25.0"
		}
		return &bi, nil
	}
	keySettle = 0
	t.Cleanup(func() { readInfo, keySettle = orig, 3*time.Second })
	find := func() error { _, keepCheck, err := Find(mosaic, ours, cache); keepCheck(); return err }
	if err := find(); err == nil {
		t.Error("the other build's stage passed the check it was keyed for")
	}
	point(other)
	if err := find(); err == nil {
		t.Fatal("the other build's stage was taken from the cache")
	}
	point(this)
	if err := find(); err != nil {
		t.Fatalf("this build's stage: %v", err)
	}
}

// TestFindRefusesByMode: a FIFO where the stage binary goes is refused at
// once, not waited on (Find opens the path to read it), and a file of
// mode 0, which cannot be opened, is refused for its mode as before.
func TestFindRefusesByMode(t *testing.T) {
	dir := t.TempDir()
	stage := filepath.Join(dir, Name)
	if err := syscall.Mkfifo(stage, 0o755); err != nil {
		t.Fatal(err)
	}
	find := func() {
		t.Helper()
		_, _, err := Find(filepath.Join(dir, "mosaic"), Ours(), filepath.Join(dir, "stage-checked"))
		if err == nil || !strings.Contains(err.Error(), "not an executable file") {
			t.Fatalf("Find: %v, want a refusal: not an executable file", err)
		}
	}
	find()
	if os.Getuid() == 0 {
		t.Skip("root opens a file of mode 0")
	}
	if err := os.Remove(stage); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stage, []byte("one build"), 0); err != nil {
		t.Fatal(err)
	}
	find()
}
