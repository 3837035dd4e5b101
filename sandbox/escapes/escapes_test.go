package escapes

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The script, run on the host (no sandbox) against stand-ins that exist,
// reaches each of them: the checks can answer "allowed", so a "denied" in a
// session means something.
func TestScriptOnTheHostReachesTheStandIns(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := StandIns{HomeFile: file, SSHKey: file, OtherWorkspace: dir, Outside: dir, Workspace: dir, HostTmp: file}
	out, err := exec.Command("sh", append([]string{"-c", Script(Table), "sh"}, s.Args()...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := Parse(string(out))
	for name, want := range map[string]string{"home-file": Allowed, "ssh-key": Allowed, "other-workspace": Allowed,
		"write-outside": Allowed, "workspace-write": Allowed, "host-tmp": Allowed, "aws-credentials": Skipped, "host-shm": Skipped} {
		if got[name] != want {
			t.Errorf("%s: %s, want %s", name, got[name], want)
		}
	}
	if len(got) != len(Table) {
		t.Errorf("%d answers for %d checks: %v", len(got), len(Table), got)
	}
}

func TestTableIsWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Table {
		if seen[c.Name] || (c.Want != Allowed && c.Want != Denied) || c.What == "" || c.Shell == "" {
			t.Errorf("bad row %+v", c)
		}
		seen[c.Name] = true
		known := c.Needs == ""
		for _, v := range vars {
			known = known || v == c.Needs
		}
		if !known {
			t.Errorf("%s needs unknown variable %s", c.Name, c.Needs)
		}
	}
}
