package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mosaic/manager/stagebin"
)

// TestStageLinksLittle: the stage binary (the exec shim, the init, the
// session-ended stage: three process starts of a session) links
// no CLI library, no D-Bus and no HTTP, so that each start costs a small
// binary's; mosaic, which does, links them still (the check sees them).
// And mosaic links none of the code that runs inside a session
// (sandbox/inside).
func TestStageLinksLittle(t *testing.T) {
	heavy := []string{"github.com/urfave/cli/v2", "github.com/godbus/dbus/v5", "github.com/coreos/go-systemd/v22/dbus",
		"github.com/coreos/go-systemd/v22/unit", "net/http"}
	stage, mosaic := goListDeps(t, "{{.ImportPath}}", "mosaic/cmd/mosaic-stage"), goListDeps(t, "{{.ImportPath}}", "mosaic/cmd/mosaic")
	for _, h := range heavy {
		if !mosaic[h] && h != "github.com/coreos/go-systemd/v22/unit" {
			t.Errorf("mosaic does not link %s: this test no longer checks what it names", h)
		}
		if stage[h] {
			t.Errorf("the stage binary links %s", h)
		}
	}
	// The code that runs inside a session is the stage binary's alone:
	// mosaic, on the host, builds the sandbox and never runs its init.
	const inside = "mosaic/sandbox/inside"
	if mosaic[inside] || !stage[inside] {
		t.Errorf("%s is linked by mosaic %v, mosaic-stage %v; want by the stage binary, not mosaic", inside, mosaic[inside], stage[inside])
	}
	// The network stack is mosaic-net's alone: its package init and size
	// cost each of the stage binary's process starts 3 ms.
	const gvisor = "gvisor.dev/gvisor/pkg/tcpip/stack"
	if stage[gvisor] || mosaic[gvisor] || !goListDeps(t, "{{.ImportPath}}", "mosaic/cmd/mosaic-net")[gvisor] {
		t.Errorf("gVisor's stack is linked by mosaic-stage %v, mosaic %v; want by mosaic-net alone", stage[gvisor], mosaic[gvisor])
	}
	for _, tag := range []string{"mosaic_weakened", "mosaic_testhooks"} {
		out, err := exec.Command("go", "list", "-deps", "-tags", buildTags+","+tag, "mosaic/cmd/mosaic-stage").Output()
		if err != nil {
			t.Fatalf("go list -deps -tags %s: %v", tag, err)
		}
		for _, h := range heavy {
			if strings.Contains("\n"+string(out), "\n"+h+"\n") {
				t.Errorf("the stage binary -tags %s links %s", tag, h)
			}
		}
	}
}

// TestStageOnlyModules: the modules the stage binaries (mosaic-stage and
// mosaic-net) link and mosaic does not are exactly stagebin.StageOnly, the ones mosaic's check of the stage
// lets through unchecked (a module added to the stage alone would otherwise
// make every start fail with stage-mismatch, or one left in the set be
// let through for nothing).
func TestStageOnlyModules(t *testing.T) {
	const module = "{{with .Module}}{{.Path}}{{end}}"
	stage, mosaic := goListDeps(t, module, "mosaic/cmd/mosaic-stage"), goListDeps(t, module, "mosaic/cmd/mosaic")
	for m := range goListDeps(t, module, "mosaic/cmd/mosaic-net") {
		stage[m] = true
	}
	for m := range stage {
		if !mosaic[m] && !stagebin.StageOnly[m] {
			t.Errorf("the stage binaries alone link %s: add it to stagebin.StageOnly", m)
		}
	}
	for m := range stagebin.StageOnly {
		if !stage[m] || mosaic[m] {
			t.Errorf("stagebin.StageOnly names %s, which is not linked by the stage binaries alone", m)
		}
	}
}

// goListDeps is the set go list -deps -f format prints for pkg and what it
// links, in the build the tests make.
func goListDeps(t *testing.T, format, pkg string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-tags", buildTags, "-f", format, pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	m := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		m[p] = true
	}
	return m
}

// nothingMade checks that a refused session name left nothing: its
// command never ran (it would have made ran), no unit, no state directory.
func nothingMade(t *testing.T, name, ran string) {
	t.Helper()
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran")
	}
	if u := mosaicUnits(t); strings.Contains(u, name) {
		t.Errorf("a unit was made: %s", u)
	}
	if _, err := os.Stat(filepath.Join(stateRoot(), "sessions", name)); err == nil {
		t.Error("a state directory was made")
	}
}

// TestStageRefusals: a session whose stage binary is missing beside mosaic,
// is not executable, or is of another build (another -ldflags stamp, another
// build tag: a weakened stage beside a plain mosaic) is refused, exit 3 with
// its code, for start, run and run --scope; nothing ran and nothing was
// made (no unit, no state directory). A pass kept in the runtime
// directory (stagebin's cache) does not outlive a change of the file: a
// stage rewritten in place after it is refused as well.
func TestStageRefusals(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	orig, err := os.ReadFile(mosaicBin)
	if err != nil {
		t.Fatal(err)
	}
	// A plain mosaic alone in a directory of its own, then beside each
	// stage binary it must refuse.
	dir := filepath.Join(ws, "install")
	bin := filepath.Join(dir, "mosaic")
	writeFile(t, bin, string(orig))
	os.Chmod(bin, 0o755)
	stage := filepath.Join(dir, "mosaic-stage")
	stale := filepath.Join(ws, "stale-stage")
	build := exec.Command("go", "build", "-tags", buildTags, "-ldflags", "-X main.commit=stale", "-o", stale, "../mosaic-stage")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building a stale stage: %v\n%s", err, out)
	}
	weakStage := filepath.Join(filepath.Dir(weakenedMosaic(t)), "mosaic-stage")
	plainStage := filepath.Join(filepath.Dir(mosaicBin), "mosaic-stage")
	cases := []struct {
		label, from  string // from: the stage binary copied beside mosaic; "" for none
		mode         os.FileMode
		code, reason string
	}{
		{"missing", "", 0, "stage-missing", "is missing"},
		{"not-executable", plainStage, 0o644, "stage-missing", "not an executable file"},
		{"stale", stale, 0o755, "stage-mismatch", "-ldflags"},
		{"weakened", weakStage, 0o755, "stage-mismatch", "-tags"},
	}
	for _, tc := range cases {
		os.Remove(stage)
		if tc.from != "" {
			b, err := os.ReadFile(tc.from)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, stage, string(b))
			os.Chmod(stage, tc.mode)
		}
		for _, verb := range [][]string{{"start"}, {"run"}, {"run", "--scope", "--direct"}} {
			t.Run(tc.label+"/"+strings.Join(verb, "-"), func(t *testing.T) {
				name := sessionName(t)
				args := append(append([]string{}, verb...), "--json", "--name", name, "--workspace", ws, "--", "touch", filepath.Join(ws, "ran"))
				r := runResult(t, exec.Command(bin, args...))
				if r.code != 3 {
					t.Fatalf("exit %d, want 3\n%s%s", r.code, r.stdout, r.stderr)
				}
				code, msg := jsonError(t, r)
				if code != tc.code || !strings.Contains(msg, tc.reason) || !strings.Contains(msg, stage) || strings.Contains(msg, "\n") {
					t.Errorf("code %q message %q; want %s, one line naming %s and %q", code, msg, tc.code, stage, tc.reason)
				}
				nothingMade(t, name, filepath.Join(ws, "ran"))
			})
		}
	}
	// The pair together runs.
	b, _ := os.ReadFile(plainStage)
	os.Remove(stage)
	writeFile(t, stage, string(b))
	os.Chmod(stage, 0o755)
	if r := runResult(t, exec.Command(bin, "run", "--workspace", ws, "--", "true")); r.code != 0 {
		t.Errorf("the matching pair: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A pass is kept (stagebin's cache) once the file is older than the
	// settle time, and a stage binary rewritten in place afterwards is
	// read again and refused: the cache never stands for a changed file.
	time.Sleep(3500 * time.Millisecond)
	cache := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "mosaic", "stage-checked")
	os.Remove(cache)
	for i := 0; i < 2; i++ { // the first keeps the pass, the second takes it
		if r := runResult(t, exec.Command(bin, "run", "--workspace", ws, "--", "true")); r.code != 0 {
			t.Fatalf("the matching pair, run %d: exit %d\n%s%s", i+1, r.code, r.stdout, r.stderr)
		}
	}
	if _, err := os.Lstat(cache); err != nil {
		t.Fatalf("the pass was not kept: %v", err)
	}
	b, _ = os.ReadFile(stale)
	f, err := os.OpenFile(stage, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	f.Close()
	time.Sleep(3500 * time.Millisecond) // past the settle time: only the key tells
	name := sessionName(t)
	r := runResult(t, exec.Command(bin, "start", "--json", "--name", name, "--workspace", ws, "--", "touch", filepath.Join(ws, "ran")))
	if code, _ := jsonError(t, r); r.code != 3 || code != "stage-mismatch" {
		t.Errorf("a stage binary rewritten in place after a kept pass: exit %d, code %q; want 3, stage-mismatch\n%s%s", r.code, code, r.stdout, r.stderr)
	}
	nothingMade(t, name, filepath.Join(ws, "ran"))
}

// TestStageCheckKeptNotFooled: the stage check a start keeps in the
// runtime directory (manager/stagebin) is not taken for a stage binary
// rewritten in place into another build with its size and its mtime kept
// (a same-length change to its build settings, then `touch -d` back): the
// inode, size, mode and mtime are the checked file's, only its ctime
// (which no process can set back) says it changed, and the start is refused
// with stage-mismatch, exit 3, nothing made. Shown to fail with the ctime
// left out of the key.
func TestStageCheckKeptNotFooled(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	dir := filepath.Join(ws, "install")
	bin, stage := filepath.Join(dir, "mosaic"), filepath.Join(dir, "mosaic-stage")
	for to, from := range map[string]string{bin: mosaicBin, stage: filepath.Join(filepath.Dir(mosaicBin), "mosaic-stage")} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, to, string(b))
		if err := os.Chmod(to, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := os.ReadFile(stage)
	if err != nil {
		t.Fatal(err)
	}
	// Another build, the same size: its -tags setting one letter off
	// (every copy of it: the linker keeps two, debug/buildinfo reads one).
	setting := "build\t-tags=" + buildTags + "\n"
	if !bytes.Contains(plain, []byte(setting)) {
		t.Fatalf("no %q in the stage binary's build information", setting)
	}
	other := bytes.ReplaceAll(plain, []byte(setting), []byte(setting[:len(setting)-2]+"r\n"))
	fi, err := os.Stat(stage)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3100 * time.Millisecond) // a check is kept once the file has settled (stagebin's keySettle)
	// Bad input writes nothing, not even the check of a good pair it made
	// (the stage is checked before the request is).
	cache := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "mosaic", "stage-checked")
	if err := os.Remove(cache); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if r := runResult(t, exec.Command(bin, "run", "--workspace", homeDir(), "--", "true")); r.code != 2 {
		t.Fatalf("a workspace that is the home: exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(cache); err == nil {
		t.Error("a request refused as bad input kept the stage's check")
	}
	if r := runResult(t, exec.Command(bin, "run", "--workspace", ws, "--", "true")); r.code != 0 {
		t.Fatalf("the matching pair: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	kept, err := os.ReadFile(cache)
	if err != nil || !bytes.HasPrefix(kept, []byte("mosaic stage check")) {
		t.Fatalf("no check was kept (%v): this test no longer tests the cache", err)
	}
	// Rewritten in place (O_TRUNC: the same inode), then its mtime set back.
	if err := os.WriteFile(stage, other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(stage, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	now, err := os.Stat(stage)
	if err != nil || !os.SameFile(fi, now) || now.Size() != fi.Size() || !now.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("the rewrite did not keep the inode, size and mtime (%v)", err)
	}
	name := sessionName(t)
	r := runResult(t, exec.Command(bin, "run", "--json", "--name", name, "--workspace", ws, "--", "touch", filepath.Join(ws, "ran")))
	if r.code != 3 {
		t.Fatalf("the rewritten stage: exit %d, want 3 (the kept check was taken)\n%s%s", r.code, r.stdout, r.stderr)
	}
	if code, msg := jsonError(t, r); code != "stage-mismatch" || !strings.Contains(msg, "-tags") {
		t.Errorf("code %q message %q; want stage-mismatch naming -tags", code, msg)
	}
	nothingMade(t, name, filepath.Join(ws, "ran"))
}
