package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"mosaic/manager"
	"mosaic/manager/records"
	"mosaic/sandbox"
)

// Issue 31, 31.15: a session's home is a tmpfs of its own, bounded
// (--home-size); a kept home is loaded into it and saved back when the
// session ends.

// homeOf reads what status says of a session's home.
func homeOf(t *testing.T, name string) (sandbox.HomeReport, string) {
	t.Helper()
	var doc struct {
		Home *sandbox.HomeReport `json:"home"`
	}
	r := mosaic(t, "status", "--json", name)
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Home == nil {
		t.Fatalf("status --json %s says nothing of its home: %v %s %s", name, err, r.stdout, r.stderr)
	}
	return *doc.Home, mosaic(t, "status", name).stdout
}

// TestHomeBounded: a session that writes past its home's bound gets
// ENOSPC there, and is told; the bound is what --home-size says (with
// infinity, shown first, the same write fits: the check can fail); while it
// runs, nothing it writes in its home is on the user's disk.
func TestHomeBounded(t *testing.T) {
	needRig(t)
	t.Parallel()
	fill := "dd if=/dev/zero of=$HOME/fill bs=1M count=16 2>&1; echo dd=$?"
	r := mosaic(t, "run", "-w", workspace(t), "--home-size", "infinity", "--", "sh", "-c", fill)
	if !strings.Contains(r.stdout, "dd=0") {
		t.Fatalf("16 MiB into an unbounded home failed: the checks below could not fail: %s %s", r.stdout, r.stderr)
	}
	name := sessionName(t)
	r = mosaic(t, "run", "--name", name, "-w", workspace(t), "--home-size", "4M", "--", "sh", "-c", fill)
	if !strings.Contains(r.stdout, "No space left on device") || strings.Contains(r.stdout, "dd=0") {
		t.Errorf("16 MiB into a home of 4 MiB: %s %s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "reached its bound (--home-size 4 MiB)") {
		t.Errorf("the session was not told its home is full: %s", r.stderr)
	}
	home, text := homeOf(t, name)
	if !home.Full || home.State != sandbox.HomeSaved || !strings.Contains(text, "reached its bound (--home-size 4 MiB)") {
		t.Errorf("status of a session whose home was full: %+v\n%s", home, text)
	}
	if fi, err := os.Stat(filepath.Join(stateRoot(), "sessions", name, "home", "fill")); err != nil || fi.Size() > 4<<20 {
		t.Errorf("the saved home's file: %v %v", fi, err)
	}
	// A kept home that does not fit a smaller bound is a refusal, and
	// stays whole.
	r = mosaic(t, "run", "--name", name, "-w", workspace(t), "--home-size", "2M", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "does not fit its bound (--home-size 2 MiB)") {
		t.Errorf("a 4 MiB kept home under --home-size 2M: exit %d %s", r.code, r.stderr)
	}
	if fi, err := os.Stat(filepath.Join(stateRoot(), "sessions", name, "home", "fill")); err != nil || fi.Size() < 3<<20 {
		t.Errorf("the kept home after a refused start: %v %v", fi, err)
	}
	// A running session's writes to its home are in memory, not on disk.
	other := sessionName(t)
	mustMosaic(t, "start", "--name", other, "-w", workspace(t), "--", "sh", "-c", "dd if=/dev/zero of=$HOME/big bs=1M count=8 && touch $HOME/done && sleep 300")
	defer mosaic(t, "rm", "-f", other)
	time.Sleep(500 * time.Millisecond)
	if use := diskUseOf(filepath.Join(stateRoot(), "sessions", other)); use > 1<<20 {
		t.Errorf("a running session's 8 MiB in its home took %d bytes of the user's disk", use)
	}
}

// diskUseOf is what dir takes on disk, below it.
func diskUseOf(dir string) int64 {
	out, err := exec.Command("du", "-s", "-B1", dir).Output()
	if err != nil {
		return -1
	}
	var n int64
	for _, c := range strings.Fields(string(out))[0] {
		n = n*10 + int64(c-'0')
	}
	return n
}

// TestKeptHomeSaved: a named session's home survives a stop and the end
// of a run, as a service and as a scope: the next session of the name sees
// its files. What the save leaves out (a FIFO, a 1 TB sparse file) is
// said; a symlink is kept as a link.
func TestKeptHomeSaved(t *testing.T) {
	needRig(t)
	t.Parallel()
	plant := "echo one > ~/f && mkdir -p ~/d && echo y > ~/d/y && ln -s " + homeDir() + "/.ssh ~/sshlink && mkfifo ~/fifo && truncate -s 1T ~/sparse"
	for _, mode := range [][]string{{"start"}, {"run", "--scope", "--direct"}} {
		t.Run(mode[0], func(t *testing.T) {
			name := sessionName(t)
			defer mosaic(t, "rm", "-f", name)
			if mode[0] == "start" {
				mustMosaic(t, "start", "--name", name, "-w", workspace(t), "--", "sh", "-c", plant+" && echo planted && sleep 300")
				eventually(t, 10*time.Second, "the session's files", func() bool {
					return strings.Contains(mosaic(t, "logs", name).stdout, "planted")
				})
				mustMosaic(t, "stop", name)
			} else {
				mustMosaic(t, append(mode, "--name", name, "-w", workspace(t), "--", "sh", "-c", plant)...)
			}
			kept := filepath.Join(stateRoot(), "sessions", name, "home")
			if b, err := os.ReadFile(filepath.Join(kept, "f")); err != nil || string(b) != "one\n" {
				t.Fatalf("the kept home's f: %q %v", b, err)
			}
			if target, err := os.Readlink(filepath.Join(kept, "sshlink")); err != nil || target != homeDir()+"/.ssh" {
				t.Errorf("the symlink was not kept as a link: %q %v", target, err)
			}
			for _, gone := range []string{"fifo", "sparse"} {
				if _, err := os.Lstat(filepath.Join(kept, gone)); err == nil {
					t.Errorf("the save kept %s", gone)
				}
			}
			home, text := homeOf(t, name)
			if home.State != sandbox.HomeSaved || home.Saved.Skipped["fifo"] != 1 || home.Saved.Skipped["too-large"] != 1 || !strings.Contains(text, "left out: 1 fifo, 1 too-large") {
				t.Errorf("status of a saved home: %+v\n%s", home, text)
			}
			next := []string{"run"}
			if mode[0] != "start" {
				next = mode
			}
			r := mustMosaic(t, append(next[:len(next):len(next)], "--name", name, "-w", workspace(t), "--", "sh", "-c", "cat ~/f ~/d/y")...)
			if r.stdout != "one\ny\n" {
				t.Errorf("the next session of the name sees %q", r.stdout)
			}
		})
	}
}

// TestKeptHomeKilled: an init killed with SIGKILL cannot save: the home
// changes since the start are lost, the kept home is whole as it was, and
// status says so.
func TestKeptHomeKilled(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t)
	defer mosaic(t, "rm", "-f", name)
	mustMosaic(t, "run", "--name", name, "-w", workspace(t), "--", "sh", "-c", "echo one > ~/f")
	mustMosaic(t, "start", "--name", name, "-w", workspace(t), "--", "sh", "-c", "echo two > ~/f && echo new > ~/g && sleep 300")
	time.Sleep(300 * time.Millisecond)
	systemctl(t, "kill", "--signal=SIGKILL", "mosaic-"+name+".service")
	eventually(t, 10*time.Second, "the session's end", func() bool {
		var doc struct{ State string }
		_ = json.Unmarshal([]byte(mosaic(t, "status", "--json", name).stdout), &doc)
		return doc.State == "inactive" || doc.State == "failed"
	})
	kept := filepath.Join(stateRoot(), "sessions", name, "home")
	if b, err := os.ReadFile(filepath.Join(kept, "f")); err != nil || string(b) != "one\n" {
		t.Errorf("the kept home after a SIGKILL: f is %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(kept, "g")); err == nil {
		t.Error("the killed session's g is in the kept home")
	}
	home, text := homeOf(t, name)
	if home.State != sandbox.HomeRunning || !strings.Contains(text, "NOT saved: the session was killed") {
		t.Errorf("status after a SIGKILL: %+v\n%s", home, text)
	}
}

// TestKeptHomeLoadNoFollow: the scope's init holds the state directory
// as its descriptor 6, in the host's mount namespace; a link an earlier
// session left in the kept home through it (/proc/self/fd/6/../..., saved
// as its text) leads a loader that follows links to the user's real home.
// Against the weakened build the loader follows it and the session reads
// the user's file; against mosaic the link stays a link, which leads
// nowhere in the session (its descriptor 6 is not the init's).
func TestKeptHomeLoadNoFollow(t *testing.T) {
	needRig(t)
	t.Parallel()
	secret := usersSecret(t)
	for _, tc := range []struct {
		bin  string
		leak bool
	}{{weakenedMosaic(t), true}, {mosaicBin, false}} {
		name := sessionName(t)
		state := filepath.Join(stateRoot(), "sessions", name)
		mosaicAs(t, tc.bin, "home", "--create", name)
		rel, err := filepath.Rel(state, secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/proc/self/fd/6/"+rel, filepath.Join(state, "home", ".k")); err != nil {
			t.Fatal(err)
		}
		r := mosaicAs(t, tc.bin, "run", "--scope", "--direct", "--name", name, "-w", workspace(t), "--", "sh", "-c", "cat ~/.k/id 2>&1; ls /proc/1/fd/6/ 2>&1")
		if got := strings.Contains(r.stdout, "THE-USERS-KEY"); got != tc.leak {
			t.Errorf("%s: the session read the user's file: %v, want %v (%s %s)", filepath.Base(tc.bin), got, tc.leak, r.stdout, r.stderr)
		}
		// The init's own descriptor: closed to the command (the init is
		// undumpable), open to it in the weakened build (dumpable).
		if got := strings.Contains(r.stdout, "session.json"); got != tc.leak {
			t.Errorf("%s: the command listed the state directory through the init's descriptor: %v, want %v (%s)", filepath.Base(tc.bin), got, tc.leak, r.stdout)
		}
		mosaicAs(t, tc.bin, "rm", "-f", name)
	}
}

// TestKeptHomeSaveNoFollow: the same descriptor, from the other side: the
// session links ~/.k to /proc/self/fd/6/..., which in its init (the
// scope's, whose descriptor 6 is the state directory on the host) leads to
// the user's real home. A save that follows links (the weakened build's)
// copies the user's files into the kept home, where the next session of the
// name reads them; mosaic's saves the link as a link.
func TestKeptHomeSaveNoFollow(t *testing.T) {
	needRig(t)
	t.Parallel()
	secret := usersSecret(t)
	for _, tc := range []struct {
		bin  string
		leak bool
	}{{weakenedMosaic(t), true}, {mosaicBin, false}} {
		name := sessionName(t)
		state := filepath.Join(stateRoot(), "sessions", name)
		rel, err := filepath.Rel(state, secret)
		if err != nil {
			t.Fatal(err)
		}
		mosaicAs(t, tc.bin, "run", "--scope", "--direct", "--name", name, "-w", workspace(t), "--", "ln", "-s", "/proc/self/fd/6/"+rel, filepath.Join(homeDir(), ".k"))
		b, _ := os.ReadFile(filepath.Join(state, "home", ".k", "id"))
		fi, lerr := os.Lstat(filepath.Join(state, "home", ".k"))
		if got := string(b) == "THE-USERS-KEY" && lerr == nil && fi.IsDir(); got != tc.leak {
			t.Errorf("%s: the save copied the user's file into the kept home: %v, want %v", filepath.Base(tc.bin), got, tc.leak)
		}
		if !tc.leak && (lerr != nil || fi.Mode()&os.ModeSymlink == 0) {
			t.Errorf("the link was not saved as a link: %v %v", fi, lerr)
		}
		mosaicAs(t, tc.bin, "rm", "-f", name)
	}
}

// TestStorageLine: status says each bound, and under --sandbox landlock
// that there is none, rather than showing a bound it does not have; an
// ended session's home says what became of it.
func TestStorageLine(t *testing.T) {
	safe := func(s string) string { return s }
	var s manager.Session
	s.Limits = &records.Limits{HomeSize: 2 << 30, TmpSize: 1 << 30}
	s.State = "inactive"
	s.Home = &sandbox.HomeReport{State: sandbox.HomeRunning, Size: 2 << 30}
	var b strings.Builder
	printStorage(&b, s, safe)
	if !strings.Contains(b.String(), "home at most 2 GiB (--home-size), /tmp at most 1 GiB (--tmp-size)") || !strings.Contains(b.String(), "NOT saved: the session was killed") {
		t.Errorf("bwrap:\n%s", b.String())
	}
	s.Sandbox = sandbox.ModeLandlock
	b.Reset()
	printStorage(&b, s, safe)
	if !strings.Contains(b.String(), "UNBOUNDED") || strings.Contains(b.String(), "at most") {
		t.Errorf("landlock:\n%s", b.String())
	}
}

// TestKeptHomeDirectoriesBounded: empty directories take nothing of the
// tmpfs's bound but a block each of the user's disk; a session bounded to
// 4 MiB that makes 20,000 of them had its save write 80 MiB. The save
// writes at most twice the bound, and says what it left out.
func TestKeptHomeDirectoriesBounded(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t)
	defer mosaic(t, "rm", "-f", name)
	mustMosaic(t, "run", "--name", name, "-w", workspace(t), "--home-size", "4M", "--",
		"sh", "-c", "mkdir ~/d && cd ~/d && seq 20000 | xargs mkdir && echo made")
	kept := filepath.Join(stateRoot(), "sessions", name, "home")
	if use := diskUseOf(kept); use < 0 || use > 8<<20+64<<10 {
		t.Errorf("20,000 empty directories in a home of 4 MiB took %d bytes of the user's disk", use)
	}
	home, text := homeOf(t, name)
	if home.State != sandbox.HomeSaved || home.Saved.Skipped["too-large"] == 0 || !strings.Contains(text, "too-large") {
		t.Errorf("status of a home of too many directories: %+v\n%s", home, text)
	}
}

// TestKeptHomeSaveOutlastsStop: a home of 200,000 empty files takes
// nothing of the tmpfs's pages, and its save longer than the time the
// init asked systemd for once from its size (10 s): systemd killed the
// save, at every stop, and the home's changes were lost. The save asks
// again as it goes; the weakened build's copy (a cp -rL) never asks, and
// is killed.
func TestKeptHomeSaveOutlastsStop(t *testing.T) {
	needRig(t)
	// Not parallel: 200,000 files made and saved twice take the machine's
	// disk and CPU for half a minute, which starves other tests' waits.
	for _, tc := range []struct {
		bin, build string
		saved      bool
	}{{weakenedMosaic(t), "weakened", false}, {mosaicBin, "mosaic", true}} {
		name := sessionName(t)
		mosaicAs(t, tc.bin, "start", "--name", name, "-w", workspace(t), "--stop-timeout", "1s", "--", "sh", "-c",
			"for d in a b c d; do mkdir ~/$d && (cd ~/$d && seq 50000 | xargs touch); done && echo made && sleep 300")
		eventually(t, 120*time.Second, "the session's files", func() bool {
			return strings.Contains(mosaic(t, "logs", name).stdout, "made")
		})
		start := time.Now()
		mosaicAs(t, tc.bin, "stop", name)
		took := time.Since(start)
		home, text := homeOf(t, name)
		if saved := home.State == sandbox.HomeSaved && home.Saved.Files == 200000; saved != tc.saved {
			t.Errorf("%s: a home of 200,000 files after a stop of %v: saved %v, want %v: %+v\n%s", tc.build, took, saved, tc.saved, home, text)
		}
		t.Logf("%s: the stop of a session with 200,000 files in its home took %v", tc.build, took)
		mosaicAs(t, tc.bin, "rm", "-f", name)
	}
}

// usersSecret makes a directory in the user's real home holding id, a
// key stand-in ("THE-USERS-KEY"), removed after the test.
func usersSecret(t *testing.T) string {
	t.Helper()
	secret := filepath.Join(homeDir(), ".mosaic-test-secret-"+randomHex())
	if err := os.MkdirAll(secret, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(secret) })
	if err := os.WriteFile(filepath.Join(secret, "id"), []byte("THE-USERS-KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	return secret
}

// startTermIgnorer starts a named session whose command ignores SIGTERM
// and has written a file in its home, and returns its name once it runs.
func startTermIgnorer(t *testing.T, bin string, env ...string) string {
	name := sessionName(t)
	if r := mosaicEnvAs(t, bin, env, "start", "--pty", "--name", name, "--workspace", workspace(t), "--", "sh", "-c",
		`trap "" TERM; echo kept > "$HOME/work"; while :; do sleep 1; done`); r.code != 0 {
		t.Fatalf("start: exit %d\n%s", r.code, r.stderr)
	}
	eventually(t, 5*time.Second, "the session to run", func() bool {
		return strings.Contains(mosaic(t, "status", name).stdout, "running")
	})
	time.Sleep(time.Second) // its trap set, its file written (in its home's tmpfs)
	return name
}

// mosaicEnvAs runs mosaic binary bin with env added to the environment.
func mosaicEnvAs(t *testing.T, bin string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	return runResult(t, cmd)
}

// TestStopSavesHomeOfTermIgnorer (issue 40): mosaic stop of a session whose
// command ignores SIGTERM (an interactive shell, start --pty -- bash) kills
// it at half the stop timeout and saves its home in the other half, rather
// than be killed whole at the timeout with its home not saved. The
// weakened stop (MOSAIC_TEST_NO_KILL_AFTER: neither the init's kill at
// half the timeout nor mosaic's kill of the command at its own) takes the
// whole timeout first and says the home was not saved.
func TestStopSavesHomeOfTermIgnorer(t *testing.T) {
	needRig(t)
	t.Parallel()
	hooked, weakEnv := hookedMosaic(t), []string{"MOSAIC_TEST_NO_KILL_AFTER=1"}
	weak := startTermIgnorer(t, hooked, weakEnv...)
	defer mosaic(t, "rm", "--force", weak)
	began := time.Now()
	w := mosaicEnvAs(t, hooked, weakEnv, "stop", weak)
	if took := time.Since(began); took <= 9*time.Second || !strings.Contains(w.stdout+w.stderr, "NOT saved") {
		t.Fatalf("the weakened stop took %v and said %q: the checks below could not fail", took, w.stdout+w.stderr)
	}
	name := startTermIgnorer(t, mosaicBin)
	defer mosaic(t, "rm", "--force", name)
	began = time.Now()
	r := mosaic(t, "stop", name)
	took := time.Since(began)
	if r.code != 0 || strings.Contains(r.stdout+r.stderr, "NOT saved") {
		t.Errorf("stop: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	if h, _ := homeOf(t, name); h.State != sandbox.HomeSaved {
		t.Errorf("the home after the stop: %+v, want saved", h)
	}
	if b, err := os.ReadFile(filepath.Join(stateRoot(), "sessions", name, "home", "work")); err != nil || string(b) != "kept\n" {
		t.Errorf("the file the session wrote in its home: %q %v", b, err)
	}
	if took > 9*time.Second {
		t.Errorf("stop took %v: the init did not kill the command at half the 10 s stop timeout", took)
	}
}

// TestStopShortTimeoutSavesHome (issue 40): mosaic stop --timeout shorter
// than the init's kill-after still saves the kept home of a command that
// ignores SIGTERM: at the timeout mosaic kills the command, not the init,
// and lets the init save before the unit's SIGKILL. The weakened stop
// (MOSAIC_TEST_NO_KILL_AFTER: killCommandForSave not called) shows the
// home not saved first.
func TestStopShortTimeoutSavesHome(t *testing.T) {
	needRig(t)
	t.Parallel()
	hooked := hookedMosaic(t)
	weak := startTermIgnorer(t, hooked)
	defer mosaic(t, "rm", "--force", weak)
	if w := mosaicEnvAs(t, hooked, []string{"MOSAIC_TEST_NO_KILL_AFTER=1"}, "stop", "--timeout", "1s", weak); !strings.Contains(w.stdout+w.stderr, "NOT saved") {
		t.Fatalf("the weakened stop --timeout 1s said %q: the check below could not fail", w.stdout+w.stderr)
	}
	name := startTermIgnorer(t, mosaicBin)
	defer mosaic(t, "rm", "--force", name)
	began := time.Now()
	r := mosaic(t, "stop", "--timeout", "1s", name)
	took := time.Since(began)
	if h, _ := homeOf(t, name); h.State != sandbox.HomeSaved {
		t.Errorf("the home after stop --timeout 1s (exit %d: %s%s): %+v, want saved", r.code, r.stdout, r.stderr, h)
	}
	if b, err := os.ReadFile(filepath.Join(stateRoot(), "sessions", name, "home", "work")); err != nil || string(b) != "kept\n" {
		t.Errorf("the file the session wrote in its home: %q %v", b, err)
	}
	if took > 4500*time.Millisecond { // under the init's own kill-after (5 s): mosaic's kill saved it
		t.Errorf("stop --timeout 1s took %v", took)
	}
}

// TestKeptHomeSavesOnlyWhatChanged (issue 40): the second run of a named
// session that changed nothing writes nothing of its home again (the kept
// home is kept as it is, though bwrap made mount points in the session's
// home for its workspace and tool caches: the kept home's directory is the
// same, its files keep their inodes, and status counts them unchanged;
// a save that linked every file into a new home failed), while a file
// rewritten in place with its time put back (as a write through a shared
// mapping leaves it) is saved with its new bytes. As a service and as a
// scope. Shown to fail by hand: with the save's compare answering from the
// times, the rewritten file kept its old bytes.
func TestKeptHomeSavesOnlyWhatChanged(t *testing.T) {
	needRig(t)
	t.Parallel()
	for _, mode := range [][]string{{"run", "--direct"}, {"run", "--scope", "--direct"}} {
		t.Run(mode[1], func(t *testing.T) {
			name := sessionName(t)
			defer mosaic(t, "rm", "-f", name)
			run := func(script string) {
				mustMosaic(t, append(mode[:len(mode):len(mode)], "--name", name, "-w", workspace(t), "--", "sh", "-c", script)...)
			}
			run("mkdir -p ~/d && head -c 3000000 /dev/urandom > ~/d/big && echo aaaa > ~/same && echo aaaa > ~/edited")
			kept := filepath.Join(stateRoot(), "sessions", name, "home")
			inode := func(rel string) uint64 {
				fi, err := os.Stat(filepath.Join(kept, rel))
				if err != nil {
					t.Fatal(err)
				}
				return fi.Sys().(*syscall.Stat_t).Ino
			}
			big, same, edited, root := inode("d/big"), inode("same"), inode("edited"), inode(".")
			run("true")
			if inode("d/big") != big || inode("same") != same || inode("edited") != edited {
				t.Error("an unchanged home's files were written again")
			}
			if inode(".") != root {
				t.Error("an unchanged home was saved anew (linked into a new home), not kept as it is")
			}
			home, text := homeOf(t, name)
			if home.Saved.Unchanged < 3 || home.Saved.Unchanged != home.Saved.Files || !strings.Contains(text, "unchanged, not written again") {
				t.Errorf("status of an unchanged home: %+v\n%s", home.Saved, text)
			}
			run("touch -r ~/edited ~/stamp && printf bbbb | dd of=$HOME/edited conv=notrunc status=none && touch -r ~/stamp ~/edited && rm ~/stamp")
			if b, _ := os.ReadFile(filepath.Join(kept, "edited")); string(b) != "bbbb\n" {
				t.Errorf("the file rewritten with its time put back was saved as %q", b)
			}
			if inode("same") != same || inode("d/big") != big {
				t.Error("the files left alone were written again beside the edited one")
			}
		})
	}
}

// heldWrite writes X over the start of ~/f through a shared mapping and
// leaves the file open for writing past the session's end: the
// descriptor is in flight on a socket that is itself in flight on it, a
// cycle the kernel's garbage collector of unix sockets frees (and so
// closes the file, IN_CLOSE_WRITE) from a worker, after the init reaped
// the session. The file is read just after it is opened, as a program
// does (its IN_OPEN merged with the write's).
const heldWrite = `import os, socket, mmap
p = os.path.expanduser("~/f")
rw = os.open(p, os.O_RDWR)
os.close(os.open(p, os.O_RDONLY))
m = mmap.mmap(rw, 0)
m[0:1] = b"X"
m.close()
a, b = socket.socketpair()
socket.send_fds(a, [b"x"], [rw, b.fileno()])
`

// TestKeptHomeSavesAWriteStillOpen: a session's write to its home through
// a file the kernel closes only after the session was reaped is saved.
// Failed with the watch counting opens less closes (inotify merged the
// read's open with the write's): the kept home's f stayed "one" in 3 runs
// of 5 (the collector won the race in the others); passes 10 of 10.
func TestKeptHomeSavesAWriteStillOpen(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t)
	defer mosaic(t, "rm", "-f", name)
	mustMosaic(t, "run", "--direct", "--name", name, "-w", workspace(t), "--", "sh", "-c", "echo one > ~/f")
	mustMosaic(t, "run", "--direct", "--name", name, "-w", workspace(t), "--", "python3", "-c", heldWrite)
	kept := filepath.Join(stateRoot(), "sessions", name, "home")
	if b, err := os.ReadFile(filepath.Join(kept, "f")); err != nil || string(b) != "Xne\n" {
		t.Errorf("the kept home's f: %q %v, the session wrote %q", b, err, "Xne\n")
	}
}
