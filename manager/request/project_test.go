package request

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"mosaic/sandbox"
)

// TestProjectAskAcceptChange: a project file's asks do not apply until
// its content is accepted (a note says how), apply once it is, and stop
// applying when the file changes, until it is accepted again; its
// tightening rules apply at once; the acceptance is kept 0600.
func TestProjectAskAcceptChange(t *testing.T) {
	p, _ := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	repoAt(t, app) // a repository clone mode, the default, can copy
	file := filepath.Join(app, ProjectFile)
	writeTestFile(t, file, "# our builds\nask-allow-host = @npm\nask-memory-max = 768M\nask-publish = 8000\n")
	req := Request{Workspace: app, Command: []string{"true"}}
	sub := filepath.Join(app, "pkg", "x")
	os.MkdirAll(sub, 0o700)
	if got := FindProject(sub, p.Home); got != file {
		t.Errorf("FindProject from a directory of the repository = %q, want its top's %s", got, file)
	}
	if got := FindProject(filepath.Join(p.Home, "src"), p.Home); got != "" {
		t.Errorf("FindProject above the repository = %q, want none", got)
	}

	spec, _, err := Prepare(req, p, "/usr/bin/bwrap")
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Allow) != 0 || spec.Limits.MemoryMax == 768<<20 || len(spec.Publish) != 0 {
		t.Errorf("untrusted asks applied: network %s, limits %+v, publish %v", spec.Network, spec.Limits, spec.Publish)
	}
	if !strings.Contains(strings.Join(spec.Notes, "\n"), "mosaic trust "+app) {
		t.Errorf("no note of the asks and the command: %q", spec.Notes)
	}

	proj, err := ReadProject(app, p)
	if err != nil || proj == nil || proj.Trusted || len(proj.Asks) != 3 {
		t.Fatalf("ReadProject = %+v, %v", proj, err)
	}
	if err := Trust(proj, p); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(trustFile(p)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the trust file: %v %v, want 0600", fi, err)
	}
	spec, _, err = Prepare(req, p, "/usr/bin/bwrap")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Network != sandbox.NetworkAllow || !strings.Contains(strings.Join(spec.Allow, " "), "@npm") || spec.Limits.MemoryMax != 768<<20 || len(spec.Publish) != 1 || len(spec.Notes) != 0 {
		t.Errorf("trusted asks: network %s %v, limits %+v, publish %v, notes %q", spec.Network, spec.Allow, spec.Limits, spec.Publish, spec.Notes)
	}
	// A flag still wins over an ask.
	spec, _, _ = Prepare(Request{Workspace: app, Command: []string{"true"}, Network: "none"}, p, "/usr/bin/bwrap")
	if spec.Network != sandbox.NetworkNone || len(spec.Allow) != 0 {
		t.Errorf("--network none with a trusted ask-allow-host: %s %v", spec.Network, spec.Allow)
	}

	// Changed (as a session in direct mode could): asks again.
	writeTestFile(t, file, "ask-allow-host = @npm @pypi\nask-memory-max = 768M\n")
	spec, _, err = Prepare(req, p, "/usr/bin/bwrap")
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Allow) != 0 || len(spec.Notes) != 1 {
		t.Errorf("a changed file's asks applied: network %s %v, notes %q", spec.Network, spec.Allow, spec.Notes)
	}
}

// TestProjectTightensAndIsJudged: a project file's own rules refuse a
// request beyond them without any acceptance, and its accepted asks are
// still judged by the machine's policy.
func TestProjectTightensAndIsJudged(t *testing.T) {
	p, _ := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	file := filepath.Join(app, ProjectFile)
	writeTestFile(t, file, "network = none\n")
	_, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}, AllowHosts: []string{"example.com"}}, p, "/usr/bin/bwrap")
	refusedBy(t, "--allow-host under the project's network = none", err, "policy-refused", file+":1")

	writeTestFile(t, file, "ask-allow-host = example.org\n")
	proj, err := ReadProject(app, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := Trust(proj, p); err != nil {
		t.Fatal(err)
	}
	pol := policyFile(t, "allow-host = example.com\n")
	_, _, err = Prepare(Request{Workspace: app, Command: []string{"true"}}, p, "/usr/bin/bwrap")
	refusedBy(t, "an accepted ask beyond the machine's policy", err, "policy-refused", pol+":1")
}

// TestProjectBadFile: a project file that does not parse is bad input
// naming its file and line; a FIFO in its place does not hang.
func TestProjectBadFile(t *testing.T) {
	p, _ := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	file := filepath.Join(app, ProjectFile)
	for _, tc := range []struct{ text, want string }{
		{"ask-allow-host = @nope\n", ":1: ask-allow-host"},
		{"\nask-publish = 99999\n", ":2: ask-publish"},
		{"ask-network = host\n", ":1: "},
		{"ask-memory-max = lots\n", ":1: ask-memory-max"},
		// A project file only tightens or asks for what its builds need:
		// it cannot lend a git credential (an agent can write the file),
		// in any spelling (issue 42).
		{"lend-git = https://git.example/me/repo\n", ":1: "},
		{"ask-lend-git = https://git.example/me/repo\n", ":1: "},
		{"LendGit = https://git.example/me/repo\n", ":1: "},
	} {
		writeTestFile(t, file, tc.text)
		_, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}}, p, "/usr/bin/bwrap")
		refusedBy(t, tc.text, err, "bad-config", file+tc.want)
	}
	os.Remove(file)
	if err := mkfifo(file); err != nil {
		t.Skip(err)
	}
	_, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}}, p, "/usr/bin/bwrap")
	refusedBy(t, "a FIFO as the project file", err, "bad-config", "not a regular file")
}

// mkfifo makes a FIFO at path.
func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }

// TestProjectPortGivenByAFlag: a trusted project's port that a --publish
// gives already is the flag's, not a port given twice.
func TestProjectPortGivenByAFlag(t *testing.T) {
	p, _ := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	writeTestFile(t, filepath.Join(app, ProjectFile), "ask-publish = 8000 8001\n")
	proj, err := ReadProject(app, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := Trust(proj, p); err != nil {
		t.Fatal(err)
	}
	spec, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}, Publish: []string{"8000"}}, p, "/usr/bin/bwrap")
	if err != nil || len(spec.Publish) != 2 {
		t.Errorf("--publish 8000 with the project's 8000 8001: %v %v, want both ports once", spec.Publish, err)
	}
	_, _, err = Prepare(Request{Workspace: app, Command: []string{"true"}, Publish: []string{"8000", "8000"}}, p, "/usr/bin/bwrap")
	refusedBy(t, "--publish 8000 twice", err, "bad-publish", "given twice")
}

// TestTrustConcurrent: many mosaic trust at once each keep their
// acceptance (the file is read, added to and written under a lock). A
// stress test, not a deterministic one: with a shared lock in place of the
// exclusive one, 3 of 3 runs lost some.
func TestTrustConcurrent(t *testing.T) {
	p := Paths{StateRoot: t.TempDir()}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := Trust(&Project{Path: fmt.Sprintf("/w/%d/.mosaic.conf", i), Hash: "h"}, p); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	m, err := readTrusted(p)
	if err != nil || len(m) != 20 {
		t.Errorf("after 20 trusts at once: %d kept, %v", len(m), err)
	}
}
