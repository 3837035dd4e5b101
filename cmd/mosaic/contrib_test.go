package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The README's commands never touch a person's files (issue 26): the rig
// works only as a test user it made and only in a directory it made, and
// the demo keeps everything it makes in a directory of its own.

// rigMark is the passwd comment contrib/rig.sh gives the users it makes.
const rigMark = "mosaic rig test user (contrib/rig.sh)"

// asPerson makes a user as a person's account would be (a home holding
// ~/src/app/precious.txt, the README's own example path, and, with
// withSrc, a ~/mosaic-rig-src of its own), removed at the end. It returns
// the name and the files that must outlive a refused rig.
func asPerson(t *testing.T, name, comment string, withSrc bool) []string {
	t.Helper()
	exec.Command("userdel", "-r", name).Run()
	args := []string{"--create-home", "--shell", "/bin/bash", "--user-group", name}
	if comment != "" {
		args = append([]string{"--comment", comment}, args...)
	}
	if out, err := exec.Command("useradd", args...).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", "-r", name).Run() })
	home := "/home/" + name
	files := []string{filepath.Join(home, "src", "app", "precious.txt")}
	if withSrc {
		files = append(files, filepath.Join(home, "mosaic-rig-src", "precious.txt"))
	}
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("mine\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// TestRigRefusesWhatItDidNotMake runs, as root on the host (make test runs
// it before the rigs), the README's path to the rig (with-user-manager.sh,
// as make demo and make test call it) with MOSAIC_RIG_USER naming an
// existing user the rig did not make: it must refuse before it writes
// anything, and the user's files stay. A rig user's ~/mosaic-rig-src
// without the rig's mark in it is refused the same way. The unguarded
// control is the rig of main before this change: its `--src` ran
// `rm -rf ~/src` of whatever user it was given.
func TestRigRefusesWhatItDidNotMake(t *testing.T) {
	if os.Getuid() != 0 || os.Getenv("MOSAIC_RIG") != "" {
		t.Skip("needs root on the host (it makes users); make test runs it there before the rigs")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Skip("no useradd")
	}
	wum, err := filepath.Abs("../../contrib/with-user-manager.sh")
	if err != nil {
		t.Fatal(err)
	}
	suffix := randomHex()[:6]
	cases := []struct {
		label, user, comment, want string
		withSrc                    bool
	}{
		{"a person's account", "mosaic-person-" + suffix, "", "the rig did not make it", false},
		{"a rig-like name with a person's comment", "mosaic-rig-person-" + suffix, "A Person", "the rig did not make it", false},
		{"a rig user's own ~/mosaic-rig-src without the mark", "mosaic-rig-nomark-" + suffix, rigMark, "the rig did not make it (no .mosaic-rig-src in it)", true},
	}
	for _, c := range cases {
		t.Run(c.label, func(t *testing.T) {
			files := asPerson(t, c.user, c.comment, c.withSrc)
			before, _ := exec.Command("getent", "passwd", c.user).Output()
			cmd := exec.Command(wum, "true")
			cmd.Dir = "../.."
			cmd.Env = append(os.Environ(), "MOSAIC_RIG_USER="+c.user)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Errorf("the rig ran as %s:\n%s", c.user, out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Errorf("the refusal says %q, want it to say %q", out, c.want)
			}
			for _, f := range files {
				if b, err := os.ReadFile(f); err != nil || string(b) != "mine\n" {
					t.Errorf("%s after the refused rig: %q %v", f, b, err)
				}
			}
			if after, _ := exec.Command("getent", "passwd", c.user).Output(); string(after) != string(before) {
				t.Errorf("the refused rig changed the user: %q, was %q", after, before)
			}
			if groups, _ := exec.Command("id", "-nG", c.user).Output(); strings.Contains(string(groups), "systemd-journal") {
				t.Errorf("the refused rig added %s to systemd-journal", c.user)
			}
		})
	}
}

// TestRigMarksItsOlderUsers: a rig user an older rig made (named
// mosaic-rig..., no passwd comment) is marked once and used; its ~/src, where
// that rig copied the tree, is left alone.
func TestRigMarksItsOlderUsers(t *testing.T) {
	if os.Getuid() != 0 || os.Getenv("MOSAIC_RIG") != "" {
		t.Skip("needs root on the host (it makes users); make test runs it there before the rigs")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Skip("no useradd")
	}
	wum, err := filepath.Abs("../../contrib/with-user-manager.sh")
	if err != nil {
		t.Fatal(err)
	}
	user := "mosaic-rig-older-" + randomHex()[:6]
	files := asPerson(t, user, "", false)
	cmd := exec.Command(wum, "sh", "-c", "pwd; cat .mosaic-rig-src")
	cmd.Env = append(os.Environ(), "MOSAIC_RIG_USER="+user)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "/home/"+user+"/mosaic-rig-src\nmade by contrib/rig.sh") {
		t.Fatalf("the rig as an older rig user: %v\n%s", err, out)
	}
	if b, _ := exec.Command("getent", "passwd", user).Output(); strings.Split(string(b), ":")[4] != rigMark {
		t.Errorf("the user is not marked: %q", b)
	}
	if b, err := os.ReadFile(files[0]); err != nil || string(b) != "mine\n" {
		t.Errorf("%s: %q %v", files[0], b, err)
	}
}

// TestDemoLeavesNothingInHome runs contrib/demo.sh as the user (what make
// demo does where the user has a manager) with a home of its own: when it
// ends, that home holds nothing. The demo of main before this change left
// ~/.ssh (0755) there.
func TestDemoLeavesNothingInHome(t *testing.T) {
	needRig(t)
	demo, err := filepath.Abs("../../contrib/demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cmd := exec.Command("bash", demo)
	cmd.Env = append(os.Environ(), "HOME="+home, "MOSAIC_BIN="+mosaicBin, "NO_COLOR=1", "XDG_STATE_HOME=", "XDG_CONFIG_HOME=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, out)
	}
	for _, want := range []string{"reading the key: cat: ", "exit code: 0; the host sees the workspace write before apply: no", "the host sees the workspace write: hello"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
	var left []string
	filepath.Walk(home, func(p string, fi os.FileInfo, err error) error {
		if p != home {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("the demo left in the home: %s", strings.Join(left, ", "))
	}
}

// script writes an executable script at dir/name.
func script(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// countLines counts the lines of a log file (0 when there is none).
func countLines(p string) int {
	b, _ := os.ReadFile(p)
	return strings.Count(string(b), "\n")
}

// fakeNPM is an npm for TestAgentInstallKeepsOnlyWhatWorks: it logs its
// arguments and the package.json it finds in --prefix, and installs a CLI
// that answers --version as the package's name says: good-cli with its
// version, stub-cli with npm's placeholder (no #!), wrong-cli with another
// version.
const fakeNPM = `#!/bin/bash
set -eu
[ "$1" != --version ] || { echo "${FAKE_NPM_VERSION:-11.19.1}"; exit 0; }
prefix="" spec="" prev=""
for a in "$@"; do
	case "$prev" in --prefix) prefix=$a ;; esac
	case "$a" in *@[0-9]*) spec=$a ;; esac
	prev=$a
done
echo "$*" >>"$FAKE_LOG"
cat "$prefix/package.json" >>"$FAKE_LOG"
pkg=${spec%@*} ver=${spec##*@}
mkdir -p "$prefix/node_modules/$pkg/bin" "$prefix/node_modules/.bin"
case "$pkg" in
good-cli) printf '#!/bin/sh\necho "%s (good)"\n' "$ver" ;;
stub-cli) printf 'echo "Error: stub native binary not installed." >&2\nexit 1\n' ;;
wrong-cli) printf '#!/bin/sh\necho "%s.1"\n' "$ver" ;;
esac >"$prefix/node_modules/$pkg/bin/cli.exe"
chmod 0755 "$prefix/node_modules/$pkg/bin/cli.exe"
ln -s "../$pkg/bin/cli.exe" "$prefix/node_modules/.bin/${pkg%-cli}"
`

// TestAgentInstallKeepsOnlyWhatWorks drives contrib/agents.sh install with
// an npm (and node) of the test's: an entry is kept only when its CLI
// answers --version with the pin on the host; a placeholder or a wrong
// version is removed and the failure names the package, the command and
// what it printed; an entry of another recipe (agents.sh, its line of
// agents.txt or npm changed) or one that stopped working is installed again; the
// approved install scripts reach npm as allowScripts, with
// --strict-allow-scripts.
func TestAgentInstallKeepsOnlyWhatWorks(t *testing.T) {
	t.Parallel()
	real, err := os.ReadFile("../../contrib/agents.sh")
	if err != nil {
		t.Skip("contrib/agents.sh is not beside this package")
	}
	dir := t.TempDir()
	tree, bin, cache, log := filepath.Join(dir, "tree"), filepath.Join(dir, "bin"), filepath.Join(dir, "cache"), filepath.Join(dir, "npm.log")
	agents := script(t, filepath.Join(tree, "contrib"), "agents.sh", string(real))
	script(t, bin, "npm", fakeNPM)
	script(t, bin, "node", "#!/bin/sh\necho v20.20.2\n")
	list := func(lines ...string) {
		if err := os.WriteFile(filepath.Join(tree, "contrib", "agents.txt"), []byte("# test\n"+strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	npmVersion := "11.19.1"
	install := func() result {
		cmd := exec.Command("bash", agents, "install")
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "MOSAIC_AGENTS_CACHE="+cache, "FAKE_LOG="+log, "FAKE_NPM_VERSION="+npmVersion)
		return runResult(t, cmd)
	}
	entry := filepath.Join(cache, "good-cli@1.0.0")
	stamp := func() string { b, _ := os.ReadFile(filepath.Join(entry, ".mosaic-recipe")); return string(b) }

	list("good-cli 1.0.0 good good-cli,dep-a")
	if r := install(); r.code != 0 {
		t.Fatalf("install: exit %d\n%s", r.code, r.stderr)
	}
	first := stamp()
	npmLog, _ := os.ReadFile(log)
	for _, want := range []string{"--strict-allow-scripts", "--ignore-scripts=false", "--include=optional", `"allowScripts":{"good-cli":true,"dep-a":true}`} {
		if !strings.Contains(string(npmLog), want) {
			t.Errorf("npm was not given %s:\n%s", want, npmLog)
		}
	}
	if len(first) < 64 || countLines(log) != 2 {
		t.Fatalf("after one install: stamp %q, npm log %d lines", first, countLines(log))
	}
	if r := install(); r.code != 0 || countLines(log) != 2 {
		t.Errorf("a second install: exit %d, npm ran again (%d lines)\n%s", r.code, countLines(log), r.stderr)
	}
	list("good-cli 1.0.0 good good-cli")
	if r := install(); r.code != 0 || countLines(log) != 4 || stamp() == first {
		t.Errorf("agents.txt's line changed: exit %d, npm log %d lines (want 4), stamp %q (was %q)\n%s", r.code, countLines(log), stamp(), first, r.stderr)
	}
	second := stamp()
	if err := os.WriteFile(agents, append(real, "# a change\n"...), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := install(); r.code != 0 || countLines(log) != 6 || stamp() == second {
		t.Errorf("agents.sh changed: exit %d, npm log %d lines (want 6)\n%s", r.code, countLines(log), r.stderr)
	}
	third := stamp()
	npmVersion = "11.20.0"
	if r := install(); r.code != 0 || countLines(log) != 8 || stamp() == third {
		t.Errorf("another npm: exit %d, npm log %d lines (want 8)\n%s", r.code, countLines(log), r.stderr)
	}
	// An entry that stopped answering is removed and installed again.
	if err := os.WriteFile(filepath.Join(entry, "node_modules", "good-cli", "bin", "cli.exe"), []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := install(); r.code != 0 || countLines(log) != 10 || !strings.Contains(r.stderr, "exited 3") {
		t.Errorf("a broken entry: exit %d, npm log %d lines (want 10)\n%s", r.code, countLines(log), r.stderr)
	}

	for _, c := range []struct{ line, pkg, want string }{
		{"stub-cli 2.0.0 stub stub-cli", "stub-cli@2.0.0", "Error: stub native binary not installed."},
		{"wrong-cli 3.0.0 wrong -", "wrong-cli@3.0.0", "3.0.0.1"},
	} {
		list(c.line)
		r := install()
		dir := filepath.Join(cache, c.pkg)
		cmdline := dir + "/node_modules/.bin/" + strings.Fields(c.line)[2] + " --version"
		if r.code == 0 {
			t.Errorf("%s: the install passed\n%s", c.pkg, r.stderr)
		}
		for _, w := range []string{c.pkg + " does not work", cmdline, c.want, "removed " + dir} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: the failure does not say %q:\n%s", c.pkg, w, r.stderr)
			}
		}
		for _, p := range []string{dir, dir + ".tmp"} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s: %s is left", c.pkg, p)
			}
		}
	}
}

// fakeDebootstrap makes a root of two files and logs its call; fakeChroot
// stands for the apt-get run inside it.
const (
	fakeDebootstrap = `#!/bin/sh
echo "$*" >>"$FAKE_LOG"
for a; do dir=$prev; prev=$a; done
mkdir -p "$dir/etc" && echo trixie >"$dir/etc/debian_version" && echo "127.0.0.1 localhost" >"$dir/etc/hosts"
`
	fakeChroot = "#!/bin/sh\nexit 0\n"
)

// rigRootScript is contrib/rig-root.sh's text and a directory for a test
// that runs it (as root: it insists; skipped otherwise, and where the
// script is not beside this package).
func rigRootScript(t *testing.T) (text []byte, dir string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("rig-root.sh runs only as root; make test runs this on the host before the rigs")
	}
	t.Parallel()
	real, err := os.ReadFile("../../contrib/rig-root.sh")
	if err != nil {
		t.Skip("contrib/rig-root.sh is not beside this package")
	}
	return real, t.TempDir()
}

// TestRigRootIsTodays drives contrib/rig-root.sh (as root: it insists) with
// a debootstrap (and chroot) of the test's: the root's path and stamp carry a hash of
// the script, a second run builds nothing, a changed script builds a root
// of its own and removes the old one, unless a rig holds it (a shared
// flock, as rig.sh --root takes); a root of the older layout is left alone.
func TestRigRootIsTodays(t *testing.T) {
	real, dir := rigRootScript(t)
	bin, cache, log := filepath.Join(dir, "bin"), filepath.Join(dir, "cache"), filepath.Join(dir, "debootstrap.log")
	script(t, bin, "debootstrap", fakeDebootstrap)
	script(t, bin, "chroot", fakeChroot)
	legacy := filepath.Join(cache, "rig-trixie")
	os.MkdirAll(legacy, 0o755)
	os.WriteFile(filepath.Join(legacy, ".mosaic-rig-stamp"), []byte("debootstrap --variant=minbase ...\n"), 0o644)
	build := func(version string) (string, result) {
		s := script(t, filepath.Join(dir, version), "rig-root.sh", string(real)+"# "+version+"\n")
		cmd := exec.Command("bash", s)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "MOSAIC_RIG_CACHE="+cache, "MOSAIC_RIG_MIRROR=http://deb.example/debian", "FAKE_LOG="+log)
		r := runResult(t, cmd)
		return strings.TrimSpace(r.stdout), r
	}
	a, r := build("a")
	if r.code != 0 || !strings.HasPrefix(a, filepath.Join(cache, "rig-trixie-")) || countLines(log) != 1 {
		t.Fatalf("first build: exit %d, root %q, %d debootstraps\n%s", r.code, a, countLines(log), r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(a, ".mosaic-rig-stamp")); !strings.HasPrefix(string(b), a[len(a)-12:]) {
		t.Errorf("stamp %q does not start with the path's hash", b)
	}
	if again, r := build("a"); again != a || countLines(log) != 1 {
		t.Errorf("the same script again: %q (exit %d), %d debootstraps", again, r.code, countLines(log))
	}
	b, r := build("b")
	if r.code != 0 || b == a || countLines(log) != 2 {
		t.Fatalf("a changed script: root %q (was %q), %d debootstraps\n%s", b, a, countLines(log), r.stderr)
	}
	if _, err := os.Stat(a); err == nil {
		t.Errorf("the older root %s is left", a)
	}
	// A rig holds b while c builds.
	f, err := os.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	if c, r := build("c"); r.code != 0 || c == b {
		t.Fatalf("third build: %q exit %d\n%s", c, r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(b, "etc", "debian_version")); err != nil {
		t.Errorf("the root a rig holds was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(legacy, ".mosaic-rig-stamp")); err != nil {
		t.Errorf("the root of the older layout was touched: %v", err)
	}
}

// rigRootMounts is the driver of TestRigRootUnmounts, run in a mount
// namespace of its own (the host's mounts are never touched): rig-root.sh
// with a debootstrap that mounts /proc inside its target as the real one
// does, (1) failing, (2) killed -9 while debootstrap runs, (3) a good
// build; after each it prints how many mounts and temporary directories
// are left under the cache, and how many debootstraps mounted.
const rigRootMounts = `set -u
left() { echo "$1 $(grep -c " $CACHE/" /proc/self/mountinfo) $(ls -a "$CACHE" | grep -c '^\.rig-') $(grep -c mounted "$FAKE_LOG")"; }
PATH=$BIN/fail:$PATH bash "$SCRIPT" >/dev/null 2>&1
left failed
PATH=$BIN/hang:$PATH bash "$SCRIPT" >/dev/null 2>&1 &
pid=$!
for i in $(seq 100); do [ "$(grep -c mounted "$FAKE_LOG")" = 2 ] && break; sleep 0.1; done
kill -9 "$pid"
kill -9 "$(sed -n 's/^mounted //p' "$FAKE_LOG" | tail -n 1)"
wait
left killed
PATH=$BIN/good:$PATH bash "$SCRIPT" >/dev/null 2>&1
left built
`

// mountingDebootstrap mounts /proc inside its target, as debootstrap does
// for the packages' scripts, then hangs (FAKE_HANG) or fails.
const mountingDebootstrap = `#!/bin/sh
for a; do dir=$prev; prev=$a; done
mkdir -p "$dir/proc" && mount -t proc proc "$dir/proc" && echo "mounted $$" >>"$FAKE_LOG"
[ "${0%/*}" = "$BIN/hang" ] && exec sleep 60
exit 1
`

// TestRigRootUnmounts (issue 31): a rig-root.sh killed mid-debootstrap left
// /proc mounted inside its temporary directory, and a later rm -rf of the
// cache walked the host's /proc. Shown: the kill leaves the mount (no trap
// runs on SIGKILL). A failed debootstrap's mounts are unmounted on exit
// (the trap), and the next run unmounts and removes a killed one's
// leftovers before it builds.
func TestRigRootUnmounts(t *testing.T) {
	real, dir := rigRootScript(t)
	bin, cache := filepath.Join(dir, "bin"), filepath.Join(dir, "cache")
	for _, kind := range []string{"hang", "fail"} {
		script(t, filepath.Join(bin, kind), "debootstrap", mountingDebootstrap)
	}
	script(t, filepath.Join(bin, "good"), "debootstrap", fakeDebootstrap)
	script(t, bin, "chroot", fakeChroot)
	s := script(t, dir, "rig-root.sh", string(real))
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "bash", "-c", rigRootMounts)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "BIN="+bin, "SCRIPT="+s, "CACHE="+cache,
		"MOSAIC_RIG_CACHE="+cache, "MOSAIC_RIG_MIRROR=http://deb.example/debian", "FAKE_LOG="+filepath.Join(dir, "debootstrap.log"))
	r := runResult(t, cmd)
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			got[k] = v
		}
	}
	if got["failed"] != "0 0 1" {
		t.Errorf("after a failed debootstrap that mounted /proc: %q (mounts, temporary directories, mounts made), want 0 0 1", got["failed"])
	}
	if got["killed"] != "1 2 2" {
		t.Fatalf("killed -9: %q (mounts, temporary directories, mounts made), want 1 2 2: this test cannot show the leftover\n%s%s", got["killed"], r.stdout, r.stderr)
	}
	if got["built"] != "0 0 2" {
		t.Errorf("the next build left the killed run's leftovers: %q (mounts, temporary directories, mounts made), want 0 0 2\n%s%s", got["built"], r.stdout, r.stderr)
	}
}
