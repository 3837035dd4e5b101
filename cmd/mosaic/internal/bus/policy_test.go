package bus

import (
	"os"
	"path/filepath"
	"testing"

	"mosaic/internal/errcode"
	"mosaic/manager/request"
)

func TestReadPolicy(t *testing.T) {
	dir := t.TempDir()
	write := func(content string) string {
		p := filepath.Join(dir, "bus.conf")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p, err := ReadPolicy(filepath.Join(dir, "missing.conf"))
	if err != nil || len(p.Capacity) != 0 {
		t.Fatalf("a missing policy: %v %v, want the empty policy", p, err)
	}
	p, err = ReadPolicy(write("[Launch]\nProfile=claude-code 2\nProfile=generic 4\nWorkspaceRoot=" + dir + "\n"))
	if err != nil || p.Capacity["claude-code"] != 2 || p.Capacity["generic"] != 4 || p.WorkspaceRoot == "" {
		t.Fatalf("policy %+v, %v", p, err)
	}
	for _, bad := range []string{"[Other]\nProfile=x 1\n", "[Launch]\nProfile=x\n", "[Launch]\nProfile=x 0\n",
		"[Launch]\nProfile=x two\n", "[Launch]\nWorkspaceRoot=relative\n", "[Launch]\nColour=blue\n"} {
		_, err := ReadPolicy(write(bad))
		var ue *errcode.Error
		if e, ok := err.(*errcode.Error); ok {
			ue = e
		}
		if ue == nil || ue.Code != "bad-policy" || ue.Exit != errcode.ExitBadInput {
			t.Errorf("policy %q: %v, want bad-policy (exit 2)", bad, err)
		}
	}
}

// TestCheckLaunch: what the request asks for is refused before capacity,
// and each refusal has its code.
func TestCheckLaunch(t *testing.T) {
	p := Policy{Capacity: map[string]int{"generic": 1}, WorkspaceRoot: "/home/u/src"}
	ok := request.Request{Workspace: "/home/u/src/a"}
	full := map[string]int{"generic": 1}
	for _, tc := range []struct {
		req     request.Request
		profile string
		running map[string]int
		code    string
	}{
		{ok, "generic", nil, ""},
		{ok, "claude-code", nil, "profile-not-allowed"},
		{ok, "generic", full, "capacity-full"},
		{request.Request{Workspace: "/home/u/other"}, "generic", full, "workspace-not-allowed"},
		{request.Request{Workspace: "/home/u/src-evil"}, "generic", nil, "workspace-not-allowed"},
		{request.Request{Workspace: "a"}, "generic", nil, "workspace-not-allowed"},
		{request.Request{Workspace: "/home/u/src/a", ExtraRO: []string{"/etc"}}, "generic", full, "bind-not-allowed"},
		{request.Request{Workspace: "/home/u/src/a", Credentials: []string{"X"}}, "generic", nil, "bind-not-allowed"},
		{request.Request{Workspace: "/home/u/src/a", MayLaunch: true}, "generic", nil, "not-permitted"},
	} {
		err := p.checkLaunch(tc.req, tc.profile, "/home/u/pm", tc.running)
		code := ""
		if e, ok := err.(*errcode.Error); ok {
			code = e.Code
		}
		if code != tc.code {
			t.Errorf("%+v %s: %v, want %q", tc.req, tc.profile, err, tc.code)
		}
	}
	// Without a WorkspaceRoot, the launching session's own workspace.
	p.WorkspaceRoot = ""
	if err := p.checkLaunch(request.Request{Workspace: "/home/u/pm/sub"}, "generic", "/home/u/pm", nil); err != nil {
		t.Errorf("a workspace under the launcher's: %v", err)
	}
	if err := p.checkLaunch(request.Request{Workspace: "/home/u/src/a"}, "generic", "/home/u/pm", nil); err == nil {
		t.Error("a workspace outside the launcher's was allowed")
	}
}

func TestProcStart(t *testing.T) {
	a, ok := procStart(os.Getpid())
	b, ok2 := procStart(os.Getpid())
	if !ok || !ok2 || a != b || a == "" {
		t.Fatalf("procStart of this process: %q %v, %q %v", a, ok, b, ok2)
	}
	if _, ok := procStart(1 << 30); ok {
		t.Error("procStart of a process that does not exist")
	}
}

func TestPolicyCommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bus.conf")
	os.WriteFile(path, []byte("[Launch]\nProfile=generic 1\nCommand=generic sh -c 'make test' \"a  b\" ''\n"), 0o600)
	p, err := ReadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Commands["generic"]; len(got) != 5 || got[2] != "make test" || got[3] != "a  b" || got[4] != "" {
		t.Fatalf("Command= read as %q", got)
	}
	for _, bad := range []string{"Command=generic\n", "Command=generic sh -c 'unclosed\n"} {
		os.WriteFile(path, []byte("[Launch]\n"+bad), 0o600)
		if _, err := ReadPolicy(path); err == nil {
			t.Errorf("%q: read without an error", bad)
		}
	}
}
