package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 16, with stand-ins for the agents (TestAgents runs the real ones).

// TestPlainVariables: --env and --pass-env reach the command as plain
// variables, status shows them as not secret and never as credentials, and
// a name that is also a credential is refused.
func TestPlainVariables(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t)
	r := mosaicWith(t, []string{"HOSTVAR=from-host"}, "", "run", "--name", name, "-w", workspace(t), "--env", "A=one two",
		"--pass-env", "HOSTVAR", "--", "sh", "-c", `echo "$A|$HOSTVAR"`)
	if r.code != 0 || r.stdout != "one two|from-host\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	st := decode[struct {
		Environment []string
		Credentials []string
	}](t, mustMosaic(t, "status", "--json", name).stdout)
	if !strings.Contains(strings.Join(st.Environment, "\n"), "A=one two") || len(st.Credentials) != 0 {
		t.Errorf("status: environment %q credentials %q", st.Environment, st.Credentials)
	}
	if text := mustMosaic(t, "status", name).stdout; !strings.Contains(text, "environment (not secret): ") {
		t.Errorf("status does not say the variables are not secret:\n%s", text)
	}
	r = mosaicWith(t, []string{"MY_TOK=s"}, "", "run", "--json", "-w", workspace(t), "--credential", "MY_TOK", "--env", "MY_TOK=x", "--", "true")
	if code, _ := jsonError(t, r); r.code != 2 || code != "bad-env" {
		t.Errorf("--env of a credential's name: exit %d %s", r.code, code)
	}
}

// TestAgentNeedsNoKeyToSayItsVersion: `claude --version` and a sign-in run
// without a key; anything else still needs one.
func TestAgentNeedsNoKeyToSayItsVersion(t *testing.T) {
	needRig(t)
	t.Parallel()
	bin := workspace(t)
	os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\necho \"fake claude $*\"\n"), 0o700)
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "ANTHROPIC_API_KEY=", "CLAUDE_CODE_OAUTH_TOKEN=", "ANTHROPIC_AUTH_TOKEN="}
	r := mosaicWith(t, env, "", "run", "-w", workspace(t), "--", "claude", "-p", "hi")
	if r.code != 3 || !strings.Contains(r.stderr, "--sign-in") {
		t.Fatalf("without a key: exit %d %q, want no-session-credential suggesting --sign-in", r.code, r.stderr)
	}
	for _, args := range [][]string{{"--", "claude", "--version"}, {"--sign-in", "--", "claude"}} {
		r = mosaicWith(t, env, "", append([]string{"run", "-w", workspace(t)}, args...)...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "fake claude") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

// TestPerUserNpmInstall: a script inside an npm package, whose dependency is
// hoisted beside it and whose #! names an interpreter outside the system
// directories (node from nvm; here a copy of sh, which every rig has), runs:
// its node_modules and that interpreter are bound, and the interpreter's
// directory leads PATH.
func TestPerUserNpmInstall(t *testing.T) {
	needRig(t)
	t.Parallel()
	root := workspace(t) // stands for ~/.npm-global or a project's prefix
	interpDir := filepath.Join(root, "node-v20", "bin")
	os.MkdirAll(interpDir, 0o755)
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(interpDir, "node"), sh, 0o755)
	mods := filepath.Join(root, "lib", "node_modules")
	os.MkdirAll(filepath.Join(mods, "fakeagent", "bin"), 0o755)
	os.MkdirAll(filepath.Join(mods, "fakedep"), 0o755)
	os.WriteFile(filepath.Join(mods, "fakeagent", "package.json"), []byte(`{"name":"fakeagent","bin":{"fakeagent":"bin/cli.js"}}`), 0o644)
	os.WriteFile(filepath.Join(mods, "fakedep", "index.sh"), []byte("echo dep loaded\n"), 0o644)
	os.WriteFile(filepath.Join(mods, "fakeagent", "bin", "cli.js"), []byte("#!"+filepath.Join(interpDir, "node")+
		"\n. \"$(dirname \"$0\")/../../fakedep/index.sh\"\ncase \"$PATH\" in "+interpDir+":*) echo interpreter on PATH;; *) echo \"PATH $PATH\";; esac\n"), 0o755)
	binDir := filepath.Join(root, "bin")
	os.MkdirAll(binDir, 0o755)
	os.Symlink(filepath.Join(mods, "fakeagent", "bin", "cli.js"), filepath.Join(binDir, "fakeagent"))
	r := mosaicWith(t, []string{"PATH=" + binDir + ":" + os.Getenv("PATH")}, "", "run", "-w", workspace(t), "--", "fakeagent")
	if r.code != 0 || r.stdout != "dep loaded\ninterpreter on PATH\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestHostLoopbackPort: --allow-host localhost:PORT reaches that port of the
// host's loopback through the egress proxy, plain HTTP included; another
// port stays unreachable.
func TestHostLoopbackPort(t *testing.T) {
	needRig(t)
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "local model here\n") }))
	_, port, _ := net.SplitHostPort(l.Addr().String())
	other, _ := net.Listen("tcp", "127.0.0.1:0")
	defer other.Close()
	_, otherPort, _ := net.SplitHostPort(other.Addr().String())
	// A plain HTTP request as a client with HTTP_PROXY sends it (bash
	// only: the systemd 257 rig's root has no curl).
	script := `exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'GET http://localhost:%s/v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n' "$1" >&3 && cat <&3`
	r := mosaic(t, "run", "-w", workspace(t), "--allow-host", "localhost:"+port, "--", "bash", "-c", script, "bash", port)
	if r.code != 0 || !strings.Contains(r.stdout, " 200 OK") || !strings.HasSuffix(r.stdout, "local model here\n") {
		t.Errorf("allowed port: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = mosaic(t, "run", "-w", workspace(t), "--allow-host", "localhost:"+port, "--", "bash", "-c", script, "bash", otherPort)
	if strings.Contains(r.stdout, "local model") || !strings.Contains(r.stdout+r.stderr, "plain HTTP is refused") {
		t.Errorf("a port not allowed: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestLogin: mosaic login PROFILE runs the agent's sign-in without a key, on
// the profile's network, in a named session whose home keeps what it wrote.
func TestLogin(t *testing.T) {
	needRig(t)
	t.Parallel()
	bin := workspace(t)
	os.WriteFile(filepath.Join(bin, "codex"), []byte("#!/bin/sh\necho \"signed in: $*\" > \"$HOME/.fake-login\"; echo \"$*\"\n"), 0o700)
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "OPENAI_API_KEY=", "CODEX_API_KEY="}
	name := sessionName(t)
	r := mosaicWith(t, env, "", "login", "codex", "--name", name, "--pty=false", "-w", workspace(t))
	// The profile's switches come first: codex -c ... login.
	if r.code != 0 || !strings.HasSuffix(r.stdout, " login\n") || !strings.Contains(r.stdout, "-c features.plugins=false") {
		t.Fatalf("mosaic login codex: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	st := decode[struct{ Network, Profile string }](t, mustMosaic(t, "status", "--json", name).stdout)
	if st.Network != "allow" || st.Profile != "codex" {
		t.Errorf("the sign-in session: %+v, want the codex profile's network", st)
	}
	home := strings.TrimSpace(mustMosaic(t, "home", name).stdout)
	if b, err := os.ReadFile(filepath.Join(home, ".fake-login")); err != nil || !strings.HasSuffix(string(b), " login\n") {
		t.Errorf("the login kept in the session's home: %q %v", b, err)
	}
}
