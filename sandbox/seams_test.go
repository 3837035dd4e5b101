package sandbox

import (
	"os"
	"path/filepath"
	"strings"
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

func TestProtectHostExec(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git", "config"), nil, 0o644)
	os.MkdirAll(filepath.Join(ws, ".vscode"), 0o755)
	os.WriteFile(filepath.Join(ws, ".envrc"), nil, 0o644)
	binds, ids, err := ProtectHostExec(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range binds {
		got = append(got, b.Kind+" "+strings.TrimPrefix(b.Dst, ws+"/"))
		if b.Reason == "" || b.Src != b.Dst {
			t.Errorf("%+v: want a reason, at its own path", b)
		}
	}
	want := "bind .git,ro-bind .git/config,ro-bind .git/hooks,ro-bind .vscode,ro-bind .envrc,ro-bind .claude"
	if strings.Join(got, ",") != want {
		t.Errorf("binds %s\nwant  %s", strings.Join(got, ","), want)
	}
	if len(ids) != len(binds) {
		t.Errorf("%d identities for %d binds", len(ids), len(binds))
	}
	if fi, err := os.Stat(filepath.Join(ws, ".git", "hooks")); err != nil || !fi.IsDir() {
		t.Error("no placeholder for the missing .git/hooks")
	}
	// No repository: an empty .git placeholder, read-only whole (and
	// .claude's).
	bare := t.TempDir()
	bare, _ = filepath.EvalSymlinks(bare)
	binds, _, _ = ProtectHostExec(bare, "")
	if len(binds) != 2 || binds[0].Kind != KindRO || binds[0].Dst != filepath.Join(bare, ".git") || binds[1].Dst != filepath.Join(bare, ".claude") {
		t.Errorf("without a repository: %+v", binds)
	}
	// A symlink in place of an entry is refused.
	os.Symlink("/tmp", filepath.Join(ws, ".idea"))
	if _, _, err := ProtectHostExec(ws, ""); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a symlinked .idea: %v", err)
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

// BenchmarkCheckBindIDs is what the identity check costs a layer: a
// workspace, an --ro and an --rw path some levels deep.
func BenchmarkCheckBindIDs(b *testing.B) {
	dir, _ := filepath.EvalSymlinks(b.TempDir())
	var ids []BindID
	for _, p := range []string{"home/u/src/app", "home/u/data", "home/u/out"} {
		path := filepath.Join(dir, p)
		os.MkdirAll(path, 0o755)
		st, _ := StatNoFollow(path)
		ids = append(ids, BindID{Path: path, ID: StatID(st)})
	}
	for b.Loop() {
		if err := checkBindIDs(ids, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

func TestProtectHostExecSymlinkedDir(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "settings.json"), nil, 0o644)
	os.Symlink(other, filepath.Join(ws, ".claude"))
	if _, _, err := ProtectHostExec(ws, ""); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a symlinked .claude: %v", err)
	}
}
