package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBusLaunchFromACopyIsACopy (attack on clone mode through the bus): a
// clone-mode session with --may-launch asks the bus for a session of a
// profile whose Workspace=direct, on its own workspace (the policy's
// default root). The launched session works on a copy too: what it writes
// is its change, not the user's checkout. Its first version took the
// profile's direct mode, and the launched command wrote the checkout the
// launcher was kept from (ESCAPED there). Shown to bite with the bus's
// `who.copied` check removed. The control: the profile's session run
// by the user is direct, as the profile says.
func TestBusLaunchFromACopyIsACopy(t *testing.T) {
	needBusRig(t)
	ws := cloneRepo(t)
	profile := "busdirect" + randomHex()[:4]
	for path, content := range map[string]string{
		filepath.Join(configDir(), "mosaic", "profiles", profile+".conf"): "[Profile]\nWorkspace=direct\n",
		filepath.Join(configDir(), "mosaic", "bus.conf"):                  "[Launch]\nProfile=" + profile + " 1\nCommand=" + profile + " sh -c 'echo escaped > ESCAPED'\n",
	} {
		os.MkdirAll(filepath.Dir(path), 0o700)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(path) })
	}
	if r := installScript(t, "--mosaic", mosaicBin); r.code != 0 {
		t.Fatalf("install: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Cleanup(func() { installScript(t, "--uninstall") })
	systemctl(t, "restart", "mosaic-bus.service")
	child := sessionName(t)
	r := mosaic(t, "run", "--may-launch", "-w", ws, "--", "sh", "-c", "mosaic bus launch --json --name "+child+" -w "+ws+" --profile "+profile+"; echo rc=$?")
	if !strings.Contains(r.stdout, "rc=0") {
		t.Fatalf("the launch: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	eventually(t, 30*time.Second, "the launched session's end", func() bool {
		s := mosaic(t, "status", child, "--json")
		return s.code == 0 && !strings.Contains(s.stdout, `"state": "active"`) && !strings.Contains(s.stdout, `"state": "activating"`)
	})
	if _, err := os.Lstat(filepath.Join(ws, "ESCAPED")); err == nil {
		t.Fatal("a session launched by a clone-mode session wrote the user's checkout (direct mode)")
	}
	if s := mosaic(t, "status", child, "--json"); !strings.Contains(s.stdout, `"workspace_copied": true`) || !strings.Contains(s.stdout, "ESCAPED") {
		t.Errorf("the launched session is not a copy whose change is ESCAPED:\n%s", s.stdout)
	}
	mosaic(t, "rm", "--force", child)
	// The control: the profile is direct, run by the user.
	mustMosaic(t, "run", "--profile", profile, "-w", ws, "--", "sh", "-c", "echo escaped > ESCAPED")
	if _, err := os.Lstat(filepath.Join(ws, "ESCAPED")); err != nil {
		t.Errorf("the profile's session run by the user did not write the checkout (the control): %v", err)
	}
}
