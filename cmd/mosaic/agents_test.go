package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mosaic/cmd/mosaic/internal/mockapi"
)

// The real agents, end to end (issue 16). contrib/agents.sh installs the
// CLIs pinned in contrib/agents.txt into MOSAIC_AGENTS_CACHE and runs this
// test in a network namespace with no route off the machine. Each agent
// talks to a mock of its model API (mockapi, HTTPS with its own CA) on the
// host's loopback, reached through the session's egress proxy.

// agentCase is how one agent is pointed at the mock and asked things.
type agentCase struct {
	bin, profile, keyVar string
	// env are --env entries; %s is the mock's URL.
	env []string
	// files are written into the session's home (mosaic home NAME); %s is the mock's URL.
	files map[string]string
	// allowLocal: the agent reads its endpoint from a file, not a variable
	// the profile knows, so the mock's port is allowed with --allow-host.
	allowLocal bool
	ask        func(prompt string) []string
	// nested: the agent's own sandbox runs its tools (a write to HOME fails there).
	nested bool
	// refusedOK are hosts the agent still asks for with no switch to stop it.
	refusedOK []string
}

var agentCases = []agentCase{
	{
		bin: "claude", profile: "claude-code", keyVar: "ANTHROPIC_API_KEY",
		env: []string{"ANTHROPIC_BASE_URL=%s"},
		// Claude Code's own sandbox (bwrap) for Bash, without a prompt.
		files:  map[string]string{".claude/settings.json": `{"sandbox":{"enabled":true,"autoAllowBashIfSandboxed":true}}`},
		ask:    func(p string) []string { return []string{"-p", "--", p} },
		nested: true,
	},
	{
		bin: "codex", profile: "codex", keyVar: "OPENAI_API_KEY",
		env: []string{"OPENAI_BASE_URL=%s/v1"},
		// Codex's own sandbox (bwrap) with the workspace writable. Codex
		// 0.171's default model (gpt-6.2-sol) gets "code mode": its tools
		// come inside the input, behind one JavaScript tool, which the mock
		// does not play; a model Codex has no metadata for gets the plain
		// exec_command tool.
		ask: func(p string) []string {
			return []string{"exec", "--skip-git-repo-check", "-m", "mock-model", "--sandbox", "workspace-write", p}
		},
		nested: true,
	},
	{
		bin: "opencode", profile: "opencode", keyVar: "ANTHROPIC_API_KEY",
		// ANTHROPIC_BASE_URL is for mosaic (opencode reads its own
		// config): it names the endpoint the key is injected into.
		env:        []string{`OPENCODE_CONFIG_CONTENT={"provider":{"anthropic":{"options":{"baseURL":"%s/v1"}}}}`, "ANTHROPIC_BASE_URL=%s"},
		allowLocal: true,
		ask:        func(p string) []string { return []string{"run", "-m", "anthropic/claude-sonnet-4-5", p} },
		refusedOK:  []string{"registry.npmjs.org:443"},
	},
	{
		bin: "pi", profile: "pi", keyVar: "ANTHROPIC_API_KEY",
		files: map[string]string{".pi/agent/models.json": `{"providers":{"anthropic":{"baseUrl":"%s"}}}`},
		// For mosaic (pi reads models.json): where the key is injected.
		env:        []string{"ANTHROPIC_BASE_URL=%s"},
		allowLocal: true,
		ask:        func(p string) []string { return []string{"--provider", "anthropic", "-p", p} },
	},
}

// pinnedAgents reads contrib/agents.txt: binary -> package@version (each
// line: package, version, binary, the packages whose install scripts run).
func pinnedAgents(t *testing.T) map[string][2]string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(), "contrib", "agents.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][2]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 3 && !strings.HasPrefix(fields[0], "#") {
			out[fields[2]] = [2]string{fields[0], fields[1]}
		}
	}
	return out
}

// noRouteOut checks that this network namespace has no route off the
// machine: no default route (IPv4 or IPv6) on any interface but loopback.
func noRouteOut() error {
	if b, err := os.ReadFile("/proc/net/route"); err == nil {
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 7 && f[1] == "00000000" && f[7] == "00000000" {
				return fmt.Errorf("a default IPv4 route via %s", f[0])
			}
		}
	}
	if b, err := os.ReadFile("/proc/net/ipv6_route"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 10 && f[0] == strings.Repeat("0", 32) && f[1] == "00" && f[9] != "lo" {
				return fmt.Errorf("a default IPv6 route via %s", f[9])
			}
		}
	}
	return nil
}

// mosaicTimed runs mosaic with a deadline: an agent that hangs fails the
// test instead of holding it.
func mosaicTimed(t *testing.T, d time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, mosaicBin, args...)
	cmd.Stdin = strings.NewReader("")
	r := runResult(t, cmd)
	if ctx.Err() != nil {
		t.Fatalf("mosaic %s: still running after %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), d, r.stdout, r.stderr)
	}
	return r
}

func TestAgents(t *testing.T) {
	cache := agentsCache(t)
	needRig(t)
	if err := noRouteOut(); err != nil {
		t.Fatalf("refusing to start an agent: this network namespace has %v (run through contrib/agents.sh test, which uses unshare --net)", err)
	}
	pinned := pinnedAgents(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mock, err := mockapi.Start(l, "localhost", "127.0.0.1", "::1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	_, port, _ := net.SplitHostPort(l.Addr().String())
	secrets := t.TempDir()
	ca := filepath.Join(secrets, "mock-ca.pem")
	if err := os.WriteFile(ca, mock.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ac := range agentCases {
		t.Run(ac.bin, func(t *testing.T) {
			pv, ok := pinned[ac.bin]
			if !ok {
				t.Fatalf("contrib/agents.txt pins no package for %s", ac.bin)
			}
			bin := filepath.Join(cache, strings.ReplaceAll(pv[0], "/", "+")+"@"+pv[1], "node_modules", ".bin", ac.bin)
			if _, err := os.Stat(bin); err != nil {
				t.Fatalf("%s@%s is not installed: %v (contrib/agents.sh install)", pv[0], pv[1], err)
			}
			// agents.sh stamps an entry only once its CLI answered --version.
			if _, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(bin))), ".mosaic-recipe")); err != nil {
				t.Fatalf("%s@%s was not made by contrib/agents.sh install (no stamp of its recipe): %v", pv[0], pv[1], err)
			}
			name := "agent-" + ac.bin
			t.Cleanup(func() { exec.Command(mosaicBin, "rm", name).Run() })
			ws := workspace(t)

			// --version in a session: no key, no network needed.
			r := mosaicTimed(t, time.Minute, "run", "--pty=false", "--name", name, "-w", ws, "--", bin, "--version")
			if r.code != 0 || !strings.Contains(r.stdout+r.stderr, pv[1]) { // pi prints it on stderr
				t.Fatalf("%s --version: exit %d, want %s\nstdout: %s\nstderr: %s", ac.bin, r.code, pv[1], r.stdout, r.stderr)
			}

			settled(t, name)
			// Configuration placed in the session's home before it runs.
			home := strings.TrimSpace(mustMosaic(t, "home", name).stdout)
			if fi, err := os.Stat(home); err != nil || fi.Mode().Perm() != 0o700 {
				t.Fatalf("mosaic home %s: %v %v, want a 0700 directory", name, fi, err)
			}
			for rel, content := range ac.files {
				p := filepath.Join(home, rel)
				os.MkdirAll(filepath.Dir(p), 0o700)
				if err := os.WriteFile(p, []byte(strings.ReplaceAll(content, "%s", mock.URL)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			key := "mock-key-" + randomHex()
			keyFile := filepath.Join(secrets, ac.bin+".env")
			if err := os.WriteFile(keyFile, []byte(ac.keyVar+"="+key+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			// The default mode (issue 38): the session works on a copy of
			// the workspace, and its files reach it at mosaic apply.
			args := []string{"run", "--pty=false", "--name", name, "-w", ws, "--env-file", keyFile, "--ca-file", ca}
			for _, e := range ac.env {
				args = append(args, "--env", strings.ReplaceAll(e, "%s", mock.URL))
			}
			if ac.allowLocal {
				args = append(args, "--allow-host", "localhost:"+port)
			}
			before := len(mock.Requests())

			// An answer printed.
			t0 := time.Now()
			r = mosaicTimed(t, 3*time.Minute, append(append(append([]string{}, args...), "--", bin), ac.ask("say hi")...)...)
			if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "MOCK-ANSWER") {
				t.Fatalf("%s: exit %d, want MOCK-ANSWER\nstdout: %s\nstderr: %s", ac.bin, r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, "mosaic: ") && len(ac.env) > 0 && !ac.allowLocal {
				t.Errorf("%s: no line saying the endpoint's host is allowed:\n%s", ac.bin, r.stderr)
			}

			answered := time.Since(t0)
			settled(t, name)
			// What the answer alone left in the copy is not the tool call's:
			// it is named, and discarded, so that the name starts again.
			if d := paths(diffOf(t, name)); d != "" {
				t.Logf("%s: answering left a change of %s; discarding it", ac.bin, d)
				mustMosaic(t, "discard", name)
			}
			// A tool call that writes a file in the workspace, and tries HOME.
			t1 := time.Now()
			out := "out-" + ac.bin + ".txt"
			prompt := "MOCKRUN[echo " + ac.bin + "-wrote > " + out + "; touch $HOME/nested-probe && echo home-writable >> " + out + " || echo home-denied >> " + out + "]"
			r = mosaicTimed(t, 3*time.Minute, append(append(append([]string{}, args...), "--", bin), ac.ask(prompt)...)...)
			if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "MOCK-DONE") {
				t.Fatalf("%s tool call: exit %d, want MOCK-DONE\nstdout: %s\nstderr: %s", ac.bin, r.code, r.stdout, r.stderr)
			}
			toolRun := time.Since(t1)
			if _, err := os.Lstat(filepath.Join(ws, out)); err == nil {
				t.Fatalf("%s wrote %s into the workspace before mosaic apply", ac.bin, out)
			}
			if got := paths(diffOf(t, name)); !strings.Contains(got, out) {
				t.Fatalf("%s: mosaic diff shows %q, not its tool call's file", ac.bin, got)
			}
			mustMosaic(t, "apply", name)
			b, err := os.ReadFile(filepath.Join(ws, out))
			if err != nil || !strings.Contains(string(b), ac.bin+"-wrote") {
				t.Fatalf("%s: the tool's file in the workspace: %q %v\nstdout: %s\nstderr: %s", ac.bin, b, err, r.stdout, r.stderr)
			}
			// The agent's own sandbox, nested in mosaic's: HOME is writable in
			// the session (the agents without one show it) but not in theirs.
			want := "home-writable"
			if ac.nested {
				want = "home-denied"
			}
			if !strings.Contains(string(b), want) {
				t.Errorf("%s: %q, want %s", ac.bin, b, want)
			}

			// Every request reached the mock with the session's key, through
			// the egress proxy, and nothing else was asked for.
			reqs := mock.Requests()[before:]
			if len(reqs) == 0 {
				t.Fatalf("%s: the mock saw no request", ac.bin)
			}
			for _, q := range reqs {
				if q.Key != key && q.Reply != "404" {
					t.Errorf("%s: %s %s carried key %q in %q, want the session's", ac.bin, q.Method, q.Path, q.Key, q.KeyHeader)
				}
			}
			journal, _ := exec.Command("journalctl", "--user", "-q", "-o", "cat", "-t", "mosaic-"+name+"-egress").CombinedOutput()
			// The key is injected on its way to the mock (issue 15): the
			// session held a placeholder, and the proxy says where it put
			// the key.
			if !strings.Contains(string(journal), ": POST localhost:"+port) || !strings.Contains(string(journal), "injected ") {
				t.Errorf("%s: no injected request to the mock in the egress proxy's journal:\n%s", ac.bin, journal)
			}
			for _, line := range strings.Split(string(journal), "\n") {
				if !strings.Contains(line, "refused") {
					continue
				}
				expected := false
				for _, h := range ac.refusedOK {
					expected = expected || strings.Contains(line, h)
				}
				if !expected {
					t.Errorf("%s: the egress proxy refused a request (a switch for non-essential traffic is missing?): %s", ac.bin, line)
				}
			}
			if ac.bin == agentCases[0].bin {
				agentInClone(t, bin, ac.bin, name, args, ac.ask(prompt))
			}
			t.Logf("%s %s: %d requests (%s ...), nested sandbox: %s; answer in %v, tool call in %v",
				pv[0], pv[1], len(reqs), reqs[0].Path, want, answered.Round(time.Millisecond), toolRun.Round(time.Millisecond))
		})
	}
}

// settled waits until the units of session name are gone: a run returns
// when its command ends, and its egress proxy stops a moment later (until
// then a new session of that name is refused as existing).
func settled(t *testing.T, name string) {
	t.Helper()
	eventually(t, 30*time.Second, "session "+name+" to be gone", func() bool {
		return !strings.Contains(mosaicUnits(t), "mosaic-"+name)
	})
}

// agentInClone runs the agent's tool call again, in a git repository
// (the main run's workspace is a plain directory): the file it writes shows
// in mosaic diff, not in the checkout, until mosaic apply. path is the agent CLI the test installed; bin, its
// name, names the file its tool call writes.
func agentInClone(t *testing.T, path, bin, name string, args, ask []string) {
	t.Helper()
	settled(t, name)
	repo := cloneRepo(t)
	clone := cloneSession(t)
	cargs := []string{"run", "--name", clone, "-w", repo}
	for i := 1; i < len(args); i++ {
		switch args[i] {
		case "--name", "-w":
			i++ // the main run's
		default:
			cargs = append(cargs, args[i])
		}
	}
	// The agent's configuration (its settings, the trust of its
	// workspace) is what the main run's home holds: the repository's
	// session gets a copy of it.
	from := strings.TrimSpace(mustMosaic(t, "home", name).stdout)
	to := strings.TrimSpace(mustMosaic(t, "home", "--create", clone).stdout)
	if out, err := exec.Command("cp", "-a", from+"/.", to).CombinedOutput(); err != nil {
		t.Fatalf("copying %s's home: %v %s", name, err, out)
	}
	r := mosaicTimed(t, 3*time.Minute, append(append(cargs, "--", path), ask...)...)
	if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "MOCK-DONE") {
		t.Fatalf("%s in clone mode: exit %d\nstdout: %s\nstderr: %s", bin, r.code, r.stdout, r.stderr)
	}
	out := filepath.Join(repo, "out-"+bin+".txt")
	if _, err := os.Lstat(out); err == nil {
		t.Fatalf("%s in clone mode wrote %s into the checkout", bin, out)
	}
	if got := paths(diffOf(t, clone)); !strings.Contains(got, "out-"+bin+".txt") {
		t.Fatalf("%s in clone mode: mosaic diff shows %q, not its tool call's file", bin, got)
	}
	mustMosaic(t, "apply", clone)
	if b, err := os.ReadFile(out); err != nil || !strings.Contains(string(b), bin+"-wrote") {
		t.Fatalf("%s in clone mode: after apply, %s: %q %v", bin, out, b, err)
	}
}

// agentsCache is the real agents' cache for a test run by contrib/agents.sh
// test (MOSAIC_AGENTS_TEST=1, set inside the network namespace with no
// route out that it makes), which it skips otherwise. The cache's variable
// alone is no sign: .ci/run --fresh exports it for the whole run, make
// test's rigs included, whose network has a route out.
func agentsCache(t *testing.T) string {
	t.Helper()
	if os.Getenv("MOSAIC_AGENTS_TEST") != "1" {
		t.Skip("the real agents run through contrib/agents.sh test (it installs them and gives the test a network namespace with no route out)")
	}
	cache := os.Getenv("MOSAIC_AGENTS_CACHE")
	if cache == "" {
		t.Fatal("contrib/agents.sh test gave no MOSAIC_AGENTS_CACHE")
	}
	return cache
}
