package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallDepsDemoSet (issue 40): `make demo` (contrib/install-deps.sh
// demo) asks only for what a session needs (bubblewrap, dbus, systemd,
// util-linux, git), never what only the tests need (openssh-server,
// debootstrap, npm, ...); `make test`'s set asks for those too. Run on a
// PATH where nothing is installed and `id` says a user, so the script
// only names what it would install. Before the split, demo got the whole
// test set (tried with 3d58589's parent: the demo case fails).
func TestInstallDepsDemoSet(t *testing.T) {
	script, err := filepath.Abs("../../contrib/install-deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	bin := t.TempDir()
	writeFile(t, filepath.Join(bin, "id"), "#!"+bash+"\necho 1000\n")
	os.Chmod(filepath.Join(bin, "id"), 0o755)
	missing := func(set ...string) []string {
		cmd := exec.Command(bash, append([]string{script}, set...)...)
		cmd.Env = []string{"PATH=" + bin}
		out, _ := cmd.CombinedOutput()
		line := strings.TrimSpace(string(out))
		if !strings.HasPrefix(line, "install-deps: missing ") {
			t.Fatalf("install-deps.sh %v: %q, want the line naming what is missing", set, line)
		}
		return strings.Fields(strings.SplitN(strings.TrimPrefix(line, "install-deps: missing "), ":", 2)[0])
	}
	demo := map[string]bool{"bubblewrap": true, "dbus-daemon": true, "systemd": true, "util-linux": true, "git": true}
	got := missing("demo")
	for _, p := range got {
		if !demo[p] {
			t.Errorf("the demo set asks for %s, which only the tests need (it asks for %v)", p, got)
		}
	}
	all := strings.Join(missing(), " ") + " "
	for _, p := range append(got, "debootstrap", "socat", "npm", "openssh-client", "gh") {
		if !strings.Contains(all, p+" ") {
			t.Errorf("the test set lacks %s: %s", p, all)
		}
	}
	if len(got) < 4 {
		t.Errorf("the demo set on an empty PATH: %v, want bubblewrap, dbus-daemon, util-linux and git at least", got)
	}
}
