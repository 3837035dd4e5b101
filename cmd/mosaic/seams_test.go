package main

// Issue 13's seams: a bound path is the object mosaic checked (13.1), one
// deny-list for every path (13.2, 18.1), the files the host later executes
// (13.3). Each attack is first shown to work against a weakened mosaic or on
// the host, then shown to fail.

import (
	"bytes"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hookedMosaic is mosaic built with the test hooks (-tags mosaic_testhooks):
// MOSAIC_TEST_PAUSE_AFTER_CHECK, MOSAIC_TEST_SKIP_BIND_IDENTITY and the others.
func hookedMosaic(t *testing.T) string { return taggedMosaic(t, "mosaic_testhooks") }

// runPaused runs the hooked mosaic, which pauses once it has checked the
// request's paths; swap runs in that pause, then mosaic goes on.
func runPaused(t *testing.T, env []string, swap func(), args ...string) result {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "pause")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(hookedMosaic(t), args...)
	cmd.Env = append(append(os.Environ(), env...), "MOSAIC_TEST_PAUSE_AFTER_CHECK="+fifo)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for paused := false; !paused; {
		// Opening for writing succeeds once mosaic reads: it has checked.
		fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err == nil {
			swap()
			unix.Close(fd)
			paused = true
			continue
		}
		select {
		case <-done:
			t.Fatalf("mosaic %v ended before its check was done: exit %d\n%s%s", args, cmd.ProcessState.ExitCode(), out.String(), errb.String())
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("mosaic never paused after its check")
		}
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("mosaic did not end")
	}
	return result{out.String(), errb.String(), cmd.ProcessState.ExitCode()}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBindIdentityRace (13.1): a directory on a bound path is swapped for a
// symlink to a decoy "home" between mosaic's check and systemd's and bwrap's
// mounts, for the workspace, an ancestor of it, --ro and --rw, as a service
// and as a scope. A mosaic that records no identities shows the decoy every
// time; mosaic shows only the checked directory or refuses.
func TestBindIdentityRace(t *testing.T) {
	needRig(t)
	type attack struct {
		name string
		// args are mosaic run's session flags given sub (the directory
		// swapped) and other (a harmless workspace); read is the directory
		// whose "which" the command prints; swapped is the path replaced.
		args    func(sub, other string) []string
		read    func(sub string) string
		swapped func(sub string) string
	}
	attacks := []attack{
		{"workspace", func(sub, _ string) []string { return []string{"-w", sub} },
			func(sub string) string { return sub }, func(sub string) string { return sub }},
		{"ancestor of the workspace", func(sub, _ string) []string { return []string{"-w", filepath.Join(sub, "inner")} },
			func(sub string) string { return filepath.Join(sub, "inner") }, func(sub string) string { return sub }},
		{"--ro", func(sub, other string) []string { return []string{"-w", other, "--ro", sub} },
			func(sub string) string { return sub }, func(sub string) string { return sub }},
		{"--rw", func(sub, other string) []string { return []string{"-w", other, "--rw", sub} },
			func(sub string) string { return sub }, func(sub string) string { return sub }},
	}
	for _, kind := range []string{"service", "scope"} {
		for _, a := range attacks {
			for _, weak := range []bool{true, false} {
				label := kind + "/" + a.name + "/identity checked"
				if weak {
					label = kind + "/" + a.name + "/no identity (weakened)"
				}
				t.Run(label, func(t *testing.T) {
					base := workspace(t)
					sub, other := filepath.Join(base, "ws", "sub"), filepath.Join(base, "other")
					decoy := filepath.Join(base, "decoy-home")
					for dir, which := range map[string]string{sub: "checked", filepath.Join(sub, "inner"): "checked",
						decoy: "decoy", filepath.Join(decoy, "inner"): "decoy", other: "other"} {
						writeFile(t, filepath.Join(dir, "which"), which+"\n")
					}
					link := filepath.Join(base, "ws", ".swap")
					if err := os.Symlink(decoy, link); err != nil {
						t.Fatal(err)
					}
					swap := func() {
						if err := unix.Renameat2(unix.AT_FDCWD, link, unix.AT_FDCWD, a.swapped(sub), unix.RENAME_EXCHANGE); err != nil {
							t.Errorf("swap: %v", err)
						}
					}
					var env []string
					if weak {
						env = []string{"MOSAIC_TEST_SKIP_BIND_IDENTITY=1"}
					}
					// The workspace's host-executed entries are protected
					// by binds of their own (checked alike): left out here,
					// so that only the workspace's and the binds' are raced.
					args := []string{"run", "--allow-write-host-exec"}
					if kind == "scope" {
						args = append(args, "--scope", "--direct")
					}
					args = append(append(args, a.args(sub, other)...), "--", "cat", filepath.Join(a.read(sub), "which"))
					r := runPaused(t, env, swap, args...)
					if weak {
						if r.stdout != "decoy\n" {
							t.Fatalf("the attack did not work against the weakened mosaic, so this test proves nothing: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
						}
						return
					}
					if strings.Contains(r.stdout, "decoy") {
						t.Fatalf("the session saw the decoy: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
					}
					if r.code == 0 && r.stdout != "checked\n" {
						t.Errorf("exit 0 with stdout %q: want the checked directory", r.stdout)
					}
					if r.code != 0 && !strings.Contains(r.stderr, "after mosaic checked it") {
						t.Errorf("refused without the reason: exit %d stderr %q", r.code, r.stderr)
					}
				})
			}
		}
	}
}

// TestDenyList (13.2, 18.1): each refused as workspace and as bind, exit 2;
// each path is first shown to exist on the host, so a refusal is the list's.
func TestDenyList(t *testing.T) {
	needRig(t)
	home := homeDir()
	cfg := filepath.Join(home, ".config")
	for _, d := range []string{filepath.Join(cfg, "mosaic"), filepath.Join(cfg, "systemd", "user"), filepath.Join(home, ".ssh")} {
		os.MkdirAll(d, 0o700)
	}
	for _, path := range []string{"/proc", "/proc/1", "/sys", "/dev", cfg, filepath.Join(cfg, "systemd"), filepath.Join(home, ".ssh"), filepath.Join(home, ".config", "mosaic")} {
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("%s is not there on the host: %v", path, err)
		}
		for _, flags := range [][]string{{"-w", path}, {"-w", workspace(t), "--ro", path}, {"-w", workspace(t), "--rw", path}} {
			r := mosaic(t, append(append([]string{"run", "--json"}, flags...), "--", "true")...)
			code, msg := jsonError(t, r)
			want := "bad-bind"
			if flags[0] == "-w" && flags[1] == path {
				want = "bad-workspace"
			}
			if r.code != 2 || code != want {
				t.Errorf("%v: exit %d code %s (%s), want 2 %s", flags, r.code, code, msg, want)
			}
		}
	}
}

// TestPlantedSymlink (13.2): a session plants ws/sub -> a directory out of
// its workspace; the user's later `-w ws/sub` or `--ro ws/sub` is refused,
// while naming the real path works.
func TestPlantedSymlink(t *testing.T) {
	needRig(t)
	ws, elsewhere := workspace(t), workspace(t)
	writeFile(t, filepath.Join(elsewhere, "secret"), "s\n")
	mustMosaic(t, "run", "--direct", "-w", ws, "--", "ln", "-s", elsewhere, filepath.Join(ws, "sub"))
	if b, err := os.ReadFile(filepath.Join(ws, "sub", "secret")); err != nil || string(b) != "s\n" {
		t.Fatalf("the planted link does not lead to the secret on the host: %v", err)
	}
	for _, flags := range [][]string{{"-w", filepath.Join(ws, "sub")}, {"-w", ws, "--ro", filepath.Join(ws, "sub")}} {
		r := mosaic(t, append(append([]string{"run", "--json"}, flags...), "--", "true")...)
		if code, msg := jsonError(t, r); r.code != 2 || !strings.Contains(msg, "planted") || !strings.Contains(msg, elsewhere) {
			t.Errorf("%v: exit %d %s %q; want exit 2 naming the real path", flags, r.code, code, msg)
		}
	}
	if r := mosaic(t, "run", "-w", elsewhere, "--", "cat", "secret"); r.code != 0 || r.stdout != "s\n" {
		t.Errorf("the real path named: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestMosaicBinaryPinned (13.2): a --scope session whose workspace holds the
// running mosaic binary and its stage binary cannot replace either, by
// writing, moving or moving their directory; the same commands do replace
// copies mosaic does not run.
func TestMosaicBinaryPinned(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	bin := filepath.Join(ws, "tools", "bin", "mosaic")
	decoy := filepath.Join(ws, "other", "bin", "mosaic")
	sum := func(p string) [32]byte { b, _ := os.ReadFile(p); return sha256.Sum256(b) }
	want := map[string][32]byte{}
	for _, name := range []string{"mosaic", "mosaic-stage"} {
		orig, err := os.ReadFile(filepath.Join(filepath.Dir(mosaicBin), name))
		if err != nil {
			t.Fatal(err)
		}
		want[name] = sha256.Sum256(orig)
		for _, d := range []string{filepath.Dir(bin), filepath.Dir(decoy)} {
			writeFile(t, filepath.Join(d, name), string(orig))
			os.Chmod(filepath.Join(d, name), 0o755)
		}
	}
	attack := func(target string) string {
		d := filepath.Dir(target)
		return `t=` + target + `; d=` + d + `
echo evil > "$t"; mv -f "$d/../bin" "$d/../bin.old"; mv -f "$t" "$t.old"; rm -f "$t"
mkdir -p "$d" 2>/dev/null; echo evil > "$t"; true`
	}
	var script []string
	for _, d := range []string{filepath.Dir(decoy), filepath.Dir(bin)} {
		script = append(script, attack(filepath.Join(d, "mosaic")), attack(filepath.Join(d, "mosaic-stage")))
	}
	cmd := exec.Command(bin, "run", "--scope", "--direct", "-w", ws, "--", "sh", "-c", strings.Join(script, "\n"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	for name, w := range want {
		if sum(filepath.Join(filepath.Dir(decoy), name)) == w {
			t.Fatalf("the attack did not replace the copy of %s mosaic does not run, so this test proves nothing", name)
		}
		if sum(filepath.Join(filepath.Dir(bin), name)) != w {
			t.Errorf("a session replaced the %s binary that runs it", name)
		}
	}
}

// TestHostExecReadOnly (13.3): a session writes core.fsmonitor into
// .git/config and a pre-commit hook, and moves .git aside to write a new
// one; with --allow-write-host-exec the host's next `git status` runs it,
// by default it runs nothing. A workspace without .git cannot get one.
func TestHostExecReadOnly(t *testing.T) {
	needRig(t)
	attack := func(ws string) string {
		mark := filepath.Join(ws, "MARK")
		return `git config core.fsmonitor "touch ` + mark + `; false"
mkdir -p .git/hooks; printf '#!/bin/sh\ntouch ` + mark + `\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit
mv .git .git.old 2>/dev/null && git init -q . && git config core.fsmonitor "touch ` + mark + `; false"
true`
	}
	git := func(ws string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		cmd.Run()
	}
	for _, optOut := range []bool{true, false} {
		ws := workspace(t)
		git(ws, "init", "-q")
		args := []string{"run", "--direct", "-w", ws}
		if optOut {
			args = append(args, "--allow-write-host-exec")
		}
		mosaic(t, append(args, "--", "sh", "-c", attack(ws))...)
		os.Remove(filepath.Join(ws, "MARK")) // the session may write it itself: only the host's run counts
		git(ws, "status")
		_, err := os.Stat(filepath.Join(ws, "MARK"))
		if optOut && err != nil {
			t.Fatal("with --allow-write-host-exec the host's git status did not run the session's fsmonitor, so this test proves nothing")
		}
		if !optOut && err == nil {
			t.Error("the host's git status ran what a session wrote")
		}
	}
	// No .git: the session cannot make one.
	ws := workspace(t)
	mosaic(t, "run", "-w", ws, "--", "sh", "-c", `git init -q . ; git config core.fsmonitor "touch `+filepath.Join(ws, "MARK")+`; false"; true`)
	os.Remove(filepath.Join(ws, "MARK"))
	git(ws, "status")
	if _, err := os.Stat(filepath.Join(ws, "MARK")); err == nil {
		t.Error("the host's git status ran the config of a repository the session made")
	}
	// Status names each protected entry with its reason.
	ws = workspace(t)
	git(ws, "init", "-q")
	name := sessionName(t)
	mustMosaic(t, "start", "--direct", "--name", name, "-w", ws, "--", "sleep", "300")
	st := mustMosaic(t, "status", name).stdout
	for _, p := range []string{".git/config", ".git/hooks"} {
		if !strings.Contains(st, filepath.Join(ws, p)) || !strings.Contains(st, "git on the host runs") {
			t.Errorf("status lacks %s with its reason:\n%s", p, st)
		}
	}
}

// TestBindIdentityRaceThroughTheBus (13.1): the attack. A
// --may-launch session asks the bus to launch a session on a directory of
// its workspace and swaps that directory for a symlink to a decoy "home"
// while the bus is between its check and systemd's mounts. Against a bus
// that sends no identities the launched session writes into the decoy;
// against mosaic it is refused, and nothing reaches the decoy.
func TestBindIdentityRaceThroughTheBus(t *testing.T) {
	needBusRig(t)
	bin := hookedMosaic(t)
	for _, weak := range []bool{true, false} {
		root := workspace(t)
		sub := filepath.Join(root, "ws", "sub")
		decoy := filepath.Join(workspace(t), "decoy-home")
		writeFile(t, filepath.Join(sub, "which"), "checked\n")
		writeFile(t, filepath.Join(decoy, "which"), "decoy\n")
		// A launched session's .git and .claude are protected by binds of their own,
		// which would fail on a decoy without one, hiding the attack.
		os.MkdirAll(filepath.Join(decoy, ".git"), 0o755)
		os.MkdirAll(filepath.Join(decoy, ".claude"), 0o755) // likewise (sandbox/directfloor)
		link := filepath.Join(root, "ws", ".swap")
		if err := os.Symlink(decoy, link); err != nil {
			t.Fatal(err)
		}
		fifo := filepath.Join(workspace(t), "pause")
		if err := unix.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(configDir(), "mosaic", "bus.conf")
		// The launched session is in direct mode (a profile's
		// Workspace=direct), whose binds the race is about: a clone-mode
		// one's copy is pinned the same way (TestBindIdentityRace).
		profile := "busdirect-" + randomHex()
		profilePath := filepath.Join(configDir(), "mosaic", "profiles", profile+".conf")
		writeFile(t, profilePath, "[Profile]\nWorkspace=direct\n")
		t.Cleanup(func() { os.Remove(profilePath) })
		// What the launched session runs is the policy's (issue 14 item 2).
		writeFile(t, cfg, "[Launch]\nProfile="+profile+" 4\nWorkspaceRoot="+root+"\nCommand="+profile+" sh -c 'cat which > seen; sleep 300'\n")
		t.Cleanup(func() { os.Remove(cfg) })
		systemctl(t, "set-environment", "MOSAIC_TEST_PAUSE_AFTER_CHECK="+fifo)
		if weak {
			systemctl(t, "set-environment", "MOSAIC_TEST_SKIP_BIND_IDENTITY=1")
		} else {
			systemctl(t, "unset-environment", "MOSAIC_TEST_SKIP_BIND_IDENTITY")
		}
		t.Cleanup(func() {
			systemctl(t, "unset-environment", "MOSAIC_TEST_PAUSE_AFTER_CHECK", "MOSAIC_TEST_SKIP_BIND_IDENTITY")
		})
		if r := installScript(t, "--mosaic", bin); r.code != 0 {
			t.Fatalf("install: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		t.Cleanup(func() { installScript(t, "--uninstall") })
		systemctl(t, "restart", "mosaic-bus.service")

		child := sessionName(t)
		// The launcher is direct too: a clone-mode one's launches are
		// clone-mode (TestBusLaunchFromACopyIsACopy).
		pm := exec.Command(mosaicBin, "run", "--direct", "--may-launch", "-w", root, "--", "sh", "-c",
			`mosaic bus launch --json --name `+child+` -w `+sub+` --profile `+profile+`; echo "rc=$?"`)
		var out bytes.Buffer
		pm.Stdout, pm.Stderr = &out, &out
		if err := pm.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { pm.Wait(); close(done) }()
		swapped := false
		for deadline := time.Now().Add(30 * time.Second); !swapped && time.Now().Before(deadline); {
			fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err != nil {
				time.Sleep(2 * time.Millisecond)
				continue
			}
			if err := unix.Renameat2(unix.AT_FDCWD, link, unix.AT_FDCWD, sub, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("swap: %v", err)
			}
			unix.Close(fd)
			swapped = true
		}
		<-done
		if !swapped {
			t.Fatalf("the bus never paused after its check:\n%s", out.String())
		}
		var seen []byte
		eventually(t, 5*time.Second, "the launched session to write what it saw, or its refusal", func() bool {
			var err error
			seen, err = os.ReadFile(filepath.Join(decoy, "seen"))
			return err == nil || !weak
		})
		if weak {
			if string(seen) != "decoy\n" {
				t.Fatalf("the attack did not work through a bus without identities, so this test proves nothing: %q\n%s\n%s", seen, out.String(), systemctl(t, "status", "mosaic-"+child+".service"))
			}
			mosaic(t, "stop", child)
			continue
		}
		if seen != nil {
			t.Fatalf("the launched session wrote into the decoy: %q\n%s", seen, out.String())
		}
		if !strings.Contains(out.String(), "start-failed") || !strings.Contains(out.String(), "after mosaic checked it") {
			t.Errorf("the launch was not refused with the reason:\n%s", out.String())
		}
	}
}
