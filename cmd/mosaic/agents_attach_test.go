package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mosaic/cmd/mosaic/internal/mockapi"
)

// TestAgentsAttach (issue 30): a real agent's TUI (Claude Code, from the
// agents' cache) started in the background with start --pty, attached to
// later: a prompt typed at the attach is answered by the mock, a detach
// leaves it running, and a second attach talks to it again. Like TestAgents
// it runs through contrib/agents.sh test (no route out of the machine).
func TestAgentsAttach(t *testing.T) {
	cache := agentsCache(t)
	needRig(t)
	if err := noRouteOut(); err != nil {
		t.Fatalf("refusing to start an agent: this network namespace has %v", err)
	}
	pv, ok := pinnedAgents(t)["claude"]
	if !ok {
		t.Fatal("contrib/agents.txt pins no package for claude")
	}
	bin := filepath.Join(cache, strings.ReplaceAll(pv[0], "/", "+")+"@"+pv[1], "node_modules", ".bin", "claude")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s@%s is not installed: %v (contrib/agents.sh install)", pv[0], pv[1], err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mock, err := mockapi.Start(l, "localhost", "127.0.0.1", "::1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	secrets := t.TempDir()
	ca := filepath.Join(secrets, "mock-ca.pem")
	keyFile := filepath.Join(secrets, "claude.env")
	if err := os.WriteFile(ca, mock.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte("ANTHROPIC_API_KEY=mock-key-"+randomHex()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	name := sessionName(t)
	t.Cleanup(func() { mosaic(t, "rm", "-f", name) })
	ws := workspace(t)
	// The first run's onboarding and the workspace's trust prompt, answered
	// beforehand in the session's home.
	home := strings.TrimSpace(mustMosaic(t, "home", "--create", name).stdout)
	state := `{"hasCompletedOnboarding": true, "theme": "dark", "projects": {"` + ws + `": {"hasTrustDialogAccepted": true}}}`
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), []byte(state), 0o600); err != nil {
		t.Fatal(err)
	}
	mustMosaic(t, "start", "--pty", "--name", name, "-w", ws, "--env-file", keyFile, "--ca-file", ca,
		"--env", "ANTHROPIC_BASE_URL="+mock.URL, "--", bin)

	a := startOnPTY(t, 40, 120, "attach", name)
	// Claude Code asks once whether to use the key it found in its
	// environment (the session's placeholder, which the test cannot name
	// beforehand in .claude.json): the test answers Yes, as a user would.
	eventually(t, 60*time.Second, "Claude Code's TUI to draw", func() bool {
		return strings.Contains(a.output(), "Claude") || strings.Contains(a.output(), "API")
	})
	if !strings.Contains(a.output(), "Claude") {
		a.typeKeys("\x1b[A")
		time.Sleep(200 * time.Millisecond)
		a.typeKeys("\r")
		eventually(t, 60*time.Second, "Claude Code's TUI to draw after the key's question", func() bool { return strings.Contains(a.output(), "Claude") })
	}
	a.typeKeys("say hi")
	time.Sleep(200 * time.Millisecond) // a TUI takes a paste-like burst with its Enter as a newline
	a.typeKeys("\r")
	a.waitFor("MOCK-ANSWER")
	a.typeKeys("\x10\x11")
	if code := a.wait(); code != 0 {
		t.Fatalf("detach: exit %d:\n%s", code, a.output())
	}
	if st := mustMosaic(t, "status", "--json", name).stdout; !strings.Contains(st, `"state": "active"`) {
		t.Fatalf("Claude Code did not run on after the detach: %s", st)
	}
	before := len(mock.Requests())
	b := startOnPTY(t, 30, 100, "attach", name)
	eventually(t, 30*time.Second, "the TUI to redraw for the second attach", func() bool { return len(b.output()) > 0 })
	b.typeKeys("say hi again")
	time.Sleep(200 * time.Millisecond)
	b.typeKeys("\r")
	eventually(t, 60*time.Second, "a second answer", func() bool { return len(mock.Requests()) > before && strings.Contains(b.output(), "MOCK-ANSWER") })
	b.typeKeys("\x10\x11")
	b.wait()
}
