package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	for _, want := range []string{"reading the key: cat: ", "exit code: 0; the host sees the workspace write: hello"} {
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
