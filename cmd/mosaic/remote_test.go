package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sshRemote is a real sshd on loopback that this test user may log in to
// with a key of the test's: the remote of mosaic --host. It runs as the test
// user (an sshd that is not root serves only its own user), so the remote's
// user manager is the rig's own.
type sshRemote struct {
	target string   // what --host names: an alias of the test's ssh config
	env    []string // MOSAIC_SSH: ssh with the test's config
	pid    int
}

// startSSHD starts an sshd on a free loopback port whose sessions find
// mosaic on PATH when withMosaic, and returns how to reach it.
func startSSHD(t *testing.T, withMosaic bool, setEnv ...string) *sshRemote {
	t.Helper()
	path := "/usr/local/bin:/usr/bin:/bin"
	if withMosaic {
		path = filepath.Dir(mosaicBin) + ":" + path
	}
	return startSSHDPath(t, path, setEnv...)
}

// startSSHDPath is startSSHD whose sessions have path as their PATH.
func startSSHDPath(t *testing.T, path string, setEnv ...string) *sshRemote {
	t.Helper()
	sshd := "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run the --host tests, but %s is missing (contrib/install-deps.sh installs openssh-server)", sshd)
		}
		t.Skipf("needs %s (apt-get install openssh-server)", sshd)
	}
	dir := t.TempDir()
	keygen := func(path string) {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	keygen(filepath.Join(dir, "host_key"))
	keygen(filepath.Join(dir, "user_key"))
	pub, _ := os.ReadFile(filepath.Join(dir, "user_key.pub"))
	hostPub, _ := os.ReadFile(filepath.Join(dir, "host_key.pub"))
	must(t, os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600))
	port := freePort(t)
	cfg := fmt.Sprintf(`ListenAddress 127.0.0.1
Port %d
HostKey %s/host_key
AuthorizedKeysFile %s/authorized_keys
PidFile none
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
SetEnv PATH=%s XDG_RUNTIME_DIR=%s %s
`, port, dir, dir, path, os.Getenv("XDG_RUNTIME_DIR"), strings.Join(setEnv, " "))
	must(t, os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o600))
	cmd := exec.Command(sshd, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	var logb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logb, &logb
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting sshd: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("sshd's log:\n%s", logb.String())
		}
	})
	user := os.Getenv("USER")
	alias := "remote-" + randomHex()
	must(t, os.WriteFile(filepath.Join(dir, "known_hosts"), []byte(fmt.Sprintf("[127.0.0.1]:%d %s", port, hostPub)), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "ssh_config"), []byte(fmt.Sprintf(`Host %s
  HostName 127.0.0.1
  Port %d
  User %s
  IdentityFile %s/user_key
  IdentitiesOnly yes
  UserKnownHostsFile %s/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
  LogLevel ERROR
`, alias, port, user, dir, dir)), 0o600))
	wrapper := filepath.Join(dir, "ssh")
	must(t, os.WriteFile(wrapper, []byte("#!/bin/sh\nexec ssh -F "+dir+"/ssh_config \"$@\"\n"), 0o700))
	// Ready when it answers.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd did not listen: %s", logb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &sshRemote{target: alias, env: []string{"MOSAIC_SSH=" + wrapper}, pid: cmd.Process.Pid}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// onHost runs mosaic --host r.target ARGS with extra environment and stdin.
func (r *sshRemote) mosaic(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	return mosaicWith(t, append(append([]string{}, r.env...), env...), stdin, append([]string{"--host", r.target}, args...)...)
}

// processesHolding lists the processes whose command line holds s.
func processesHolding(s string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			found = append(found, filepath.Base(d)+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}

func TestRemoteHost(t *testing.T) {
	needRig(t)
	r := startSSHD(t, true)
	ws := workspace(t)

	t.Run("version names the host", func(t *testing.T) {
		res := r.mosaic(t, nil, "", "version", "--json")
		var doc map[string]any
		if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil || res.code != 0 {
			t.Fatalf("exit %d, %v\n%s%s", res.code, err, res.stdout, res.stderr)
		}
		if doc["host"] != r.target || doc["version"] == "" {
			t.Errorf("version --json over --host: %v; want the host named and a version", doc)
		}
	})

	t.Run("a credential reaches the session over stdin, on no command line", func(t *testing.T) {
		name := sessionName(t)
		secret := "remote-secret-" + randomHex() + randomHex()
		res := r.mosaic(t, []string{"MY_REMOTE_KEY=" + secret}, "", "start", "--direct", "--name", name, "--workspace", ws, "--credential", "MY_REMOTE_KEY",
			"--", "/bin/sh", "-c", `printf %s "$MY_REMOTE_KEY" > out-`+name+`; sleep 60`)
		if res.code != 0 {
			t.Fatalf("start over --host: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		eventually(t, 10*time.Second, "the session to write the credential it got", func() bool {
			b, _ := os.ReadFile(filepath.Join(ws, "out-"+name))
			return string(b) == secret
		})
		if found := processesHolding(secret); found != nil {
			t.Errorf("the credential is on a command line: %v", found)
		}
		st := r.mosaic(t, nil, "", "status", name, "--json")
		var doc map[string]any
		if err := json.Unmarshal([]byte(st.stdout), &doc); err != nil {
			t.Fatalf("status --json: %v\n%s", err, st.stdout)
		}
		if doc["host"] != r.target || doc["state"] != "active" {
			t.Errorf("status over --host: host %v, state %v; want %s, active", doc["host"], doc["state"], r.target)
		}
		if strings.Contains(st.stdout, secret) {
			t.Error("status shows the credential's value")
		}
		// list of two hosts (the remote and this machine, here the same
		// manager): the session twice, each row naming its host.
		lst := mosaicWith(t, r.env, "", "list", "--host", r.target, "--host", "local")
		if lst.code != 0 || !strings.HasPrefix(lst.stdout, "HOST") || strings.Count(lst.stdout, name) != 2 ||
			!strings.Contains(lst.stdout, r.target) || !strings.Contains(lst.stdout, "local") {
			t.Errorf("list --host A --host local: exit %d\n%s%s", lst.code, lst.stdout, lst.stderr)
		}
		logs := r.mosaic(t, nil, "", "stop", name)
		if logs.code != 0 {
			t.Errorf("stop over --host: exit %d %s", logs.code, logs.stderr)
		}
	})

	t.Run("what a session printed is escaped on this terminal", func(t *testing.T) {
		name := sessionName(t)
		if res := r.mosaic(t, nil, "", "start", "--name", name, "--workspace", ws, "--", "/bin/sh", "-c", `printf 'title\033]0;pwned\007 done\n'; sleep 60`); res.code != 0 {
			t.Fatalf("start: %d %s", res.code, res.stderr)
		}
		eventually(t, 10*time.Second, "the session's line in the journal", func() bool {
			return strings.Contains(r.mosaic(t, nil, "", "logs", name).stdout, "done")
		})
		p := startOnPTYEnv(t, mosaicBin, r.env, 24, 80, "--host", r.target, "logs", name)
		p.wait()
		if got := p.output(); strings.Contains(got, "\033]0;") || !strings.Contains(got, `title\e]0;pwned\x07 done`) {
			t.Errorf("logs over --host on a terminal: %q; want the escape sequence escaped", got)
		}
	})

	t.Run("run: exit status and stdin", func(t *testing.T) {
		res := r.mosaic(t, nil, "through-ssh\n", "run", "--workspace", ws, "--", "/bin/sh", "-c", `read l; echo "got:$l"; exit 7`)
		if res.code != 7 || res.stdout != "got:through-ssh\n" {
			t.Errorf("run over --host: exit %d, stdout %q, stderr %q; want 7, got:through-ssh", res.code, res.stdout, res.stderr)
		}
		// A command's own 255 is its exit code, not a lost connection.
		if res := r.mosaic(t, nil, "", "run", "--workspace", ws, "--", "/bin/sh", "-c", "exit 255"); res.code != 255 {
			t.Errorf("run of exit 255 over --host: exit %d %s", res.code, res.stderr)
		}
	})

	// A session's stderr reaches this side on the stream that carries the
	// remote stage's marker lines: one it prints is its output, not the
	// stage's word (no "has no mosaic", no other protocol, no exit), and
	// the run's exit status stays its own.
	t.Run("a session's line that looks like a marker is only output", func(t *testing.T) {
		for _, line := range []string{"mosaic-remote: no mosaic on this host", "mosaic-remote: protocol 9, this mosaic speaks 9", `mosaic: unknown command "remote-exec"`} {
			res := r.mosaic(t, nil, "", "run", "--workspace", ws, "--", "/bin/sh", "-c", `echo '`+line+`' >&2; echo after >&2; exit 5`)
			if res.code != 5 || !strings.Contains(res.stderr, line+"\nafter\n") {
				t.Errorf("a session printing %q: exit %d, stderr %q; want 5 (its own exit; a refusal is 3) and the line passed on", line, res.code, res.stderr)
			}
		}
	})

	t.Run("run on a terminal: window size, Ctrl-C, exit status", func(t *testing.T) {
		p := startOnPTYEnv(t, mosaicBin, r.env, 33, 101, "--host", r.target, "run", "--quiet", "--workspace", ws, "--", "/bin/sh", "-c", `stty size; echo ready; sleep 30`)
		p.waitFor("ready")
		if !strings.Contains(p.output(), "33 101") {
			t.Errorf("the remote session's terminal is not this one's size: %q", p.output())
		}
		p.typeKeys("\x03")
		if code := p.wait(); code != 130 {
			t.Errorf("Ctrl-C over --host: exit %d, want 130\n%s", code, p.output())
		}
	})

	t.Run("a host that is not there", func(t *testing.T) {
		res := mosaicWith(t, nil, "", "--host", "127.0.0.1:"+strconv.Itoa(freePort(t)), "list", "--json")
		var doc struct {
			Host  string
			Error struct{ Code string }
		}
		_ = json.Unmarshal([]byte(res.stdout), &doc)
		if res.code != 1 || doc.Error.Code != "remote-unreachable" || doc.Host == "" {
			t.Errorf("unreachable host: exit %d, %s %s", res.code, res.stdout, res.stderr)
		}
	})

	t.Run("a host that never answers is named, the others listed", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never speaks
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				defer c.Close()
			}
		}()
		silent := l.Addr().String()
		start := time.Now()
		res := mosaicWith(t, append([]string{"MOSAIC_HOST_TIMEOUT=3s"}, r.env...), "", "list", "--host", silent, "--host", r.target)
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("list waited %s on a silent host (bound 3s)", took)
		}
		if res.code != 1 || !strings.Contains(res.stderr, silent) || !strings.HasPrefix(res.stdout, "HOST") && !strings.Contains(res.stdout, "no sessions") {
			t.Errorf("list with a silent host: exit %d\nstdout %s\nstderr %s", res.code, res.stdout, res.stderr)
		}
	})

	t.Run("a run whose connection drops stops its session", func(t *testing.T) {
		name := sessionName(t)
		cmd := exec.Command(mosaicBin, "--host", r.target, "run", "--name", name, "--workspace", ws, "--", "sleep", "60")
		cmd.Env = append(os.Environ(), r.env...)
		must(t, cmd.Start())
		defer cmd.Process.Kill()
		eventually(t, 15*time.Second, "the remote run's session to start", func() bool {
			return strings.Contains(mosaic(t, "status", name, "--json").stdout, `"state": "active"`)
		})
		for _, c := range childPIDs(cmd.Process.Pid) {
			syscall.Kill(c, syscall.SIGKILL)
		}
		cmd.Wait()
		eventually(t, 15*time.Second, "the session of a run whose ssh died to stop", func() bool {
			return !strings.Contains(mosaic(t, "status", name, "--json").stdout, `"state": "active"`)
		})
	})

	t.Run("ssh killed during logs -f", func(t *testing.T) {
		name := sessionName(t)
		if res := r.mosaic(t, nil, "", "start", "--name", name, "--workspace", ws, "--", "/bin/sh", "-c", "echo first-line; sleep 60"); res.code != 0 {
			t.Fatalf("start: %d %s", res.code, res.stderr)
		}
		cmd := exec.Command(mosaicBin, "--host", r.target, "logs", "-f", name)
		cmd.Env = append(os.Environ(), r.env...)
		var out, errb lockedBuffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		must(t, cmd.Start())
		eventually(t, 15*time.Second, "logs -f over --host to print", func() bool { return strings.Contains(out.String(), "first-line") })
		for _, c := range childPIDs(cmd.Process.Pid) {
			syscall.Kill(c, syscall.SIGKILL) // the ssh between
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatal("logs -f did not return after its ssh was killed")
		}
		if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(errb.String(), "lost "+r.target) {
			t.Errorf("logs -f with ssh killed: exit %d, stderr %q; want 1 naming the lost host", cmd.ProcessState.ExitCode(), errb.String())
		}
		// The session is the remote's unit: it runs on.
		if st := r.mosaic(t, nil, "", "status", name, "--json"); !strings.Contains(st.stdout, `"state": "active"`) {
			t.Errorf("the session did not run on after the connection died: %s", st.stdout)
		}
	})
}

// TestRemoteKeyInjection: a key from this environment reaches the remote's
// egress proxy over ssh's stdin and is injected there as locally; the
// session holds a placeholder, and the key is on no command line of either
// side (here one machine) while the session runs.
func TestRemoteKeyInjection(t *testing.T) {
	n := needTestNet(t)
	caPEM, cert := testCA(t, "mockhost.mosaic.test")
	vendor := startVendorMock(t, n, cert)
	roots := filepath.Join(t.TempDir(), "roots.pem")
	must(t, os.WriteFile(roots, caPEM, 0o644))
	r := startSSHD(t, true, "MOSAIC_EGRESS_TEST_ROOTS="+roots)
	ws := workspace(t)
	key := "sk-ant-api03-" + strings.Repeat(randomHex(), 11) + "AA"
	env := []string{"ANTHROPIC_API_KEY=" + key, "CLAUDE_CODE_OAUTH_TOKEN=", "ANTHROPIC_BASE_URL=https://" + vendor.addr}
	name := sessionName(t)
	res := r.mosaic(t, env, "", "start", "--direct", "--name", name, "--workspace", ws, "--profile", "claude-code", "--allow-host", n+".0/24",
		"--", "bash", "-c", `printf %s "$ANTHROPIC_API_KEY" > ph; curl -sS -X POST "https://$1/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY" -d '{}' -o /dev/null -w '%{http_code}' > code; sleep 60`, "bash", vendor.addr)
	if res.code != 0 {
		t.Fatalf("start over --host: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	eventually(t, 15*time.Second, "the session's request to the vendor", func() bool {
		b, _ := os.ReadFile(filepath.Join(ws, "code"))
		return string(b) == "200"
	})
	if got := vendor.headers("/v1/messages"); len(got) != 1 || got[0].Get("X-Api-Key") != key {
		t.Errorf("the vendor did not get the key from the remote's proxy: %v", got)
	}
	if ph, _ := os.ReadFile(filepath.Join(ws, "ph")); string(ph) == key || len(ph) == 0 {
		t.Errorf("the session holds %q, not a placeholder", ph)
	}
	if found := processesHolding(key[20:]); found != nil {
		t.Errorf("the key is on a command line: %v", found)
	}
	if res := r.mosaic(t, nil, "", "stop", name); res.code != 0 {
		t.Errorf("stop: %s", res.stderr)
	}
	if entries, _ := os.ReadDir(credentialDir()); len(entries) > 0 {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), name) {
				t.Errorf("credential file %s outlived the start", e.Name())
			}
		}
	}
}

func TestRemoteHostWithoutMosaic(t *testing.T) {
	needRig(t)
	if _, err := os.Stat("/usr/local/bin/mosaic"); err == nil {
		t.Fatalf("/usr/local/bin/mosaic exists here, so no host of this machine lacks mosaic: remove it to run this test")
	}
	r := startSSHD(t, false)
	res := r.mosaic(t, nil, "", "doctor", "--json")
	var doc struct {
		Host  string
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal([]byte(res.stdout), &doc)
	if res.code != 3 || doc.Error.Code != "remote-no-mosaic" || !strings.Contains(doc.Error.Message, "install") {
		t.Errorf("a host without mosaic: exit %d, %s %s; want 3, remote-no-mosaic saying how to install", res.code, res.stdout, res.stderr)
	}
}

// childPIDs are the direct children of pid.
func childPIDs(pid int) []int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// A host whose `mosaic` is another program (issue 40): the call says
// remote-no-mosaic, and on a terminal (where the credentials are handed to
// a hold first) nothing of that program's usage is shown; a session run
// on a terminal ends without ssh's "Connection to HOST closed." even where
// the user's ssh config logs at INFO (the host's own ssh -t with that
// config shown saying it first).
func TestRemoteHostForeignMosaic(t *testing.T) {
	needRig(t)
	if _, err := os.Stat("/usr/local/bin/mosaic"); err == nil {
		t.Fatalf("/usr/local/bin/mosaic exists here, so it would be found before the other program: remove it to run this test")
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "mosaic"), "#!/bin/sh\necho 'usage: mosaic [-v] FILE (a mosaic image maker)' >&2\nexit 64\n")
	os.Chmod(filepath.Join(dir, "mosaic"), 0o755)
	r := startSSHDPath(t, dir+":/usr/local/bin:/usr/bin:/bin")
	res := r.mosaic(t, nil, "", "list", "--json")
	var doc struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal([]byte(res.stdout), &doc)
	if res.code != 3 || doc.Error.Code != "remote-no-mosaic" || !strings.Contains(doc.Error.Message, "another program") {
		t.Errorf("list --json on a host whose mosaic is another program: exit %d, %s %s; want 3, remote-no-mosaic", res.code, res.stdout, res.stderr)
	}
	ws := workspace(t)
	p := startOnPTYEnv(t, mosaicBin, r.env, 24, 80, "--host", r.target, "run", "--workspace", ws, "--", "true")
	if code := p.wait(); code != 3 || !strings.Contains(p.output(), "another program") || strings.Contains(p.output(), "usage: mosaic") {
		t.Errorf("run on a terminal, on a host whose mosaic is another program: exit %d\n%s", code, p.output())
	}

	// ssh's own notes at INFO, as a user's config may have them.
	m := startSSHD(t, true)
	cfg := filepath.Join(filepath.Dir(strings.TrimPrefix(m.env[0], "MOSAIC_SSH=")), "ssh_config")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cfg, strings.Replace(string(b), "LogLevel ERROR", "LogLevel INFO", 1))
	// The host's ssh with that config says it on a terminal: the check
	// below could fail.
	c := startOnPTYEnv(t, strings.TrimPrefix(m.env[0], "MOSAIC_SSH="), nil, 24, 80, "-t", m.target, "true")
	if c.wait(); !strings.Contains(c.output(), "Connection to") {
		t.Fatalf("ssh -t at LogLevel INFO did not say the connection closed (the control): %q", c.output())
	}
	q := startOnPTYEnv(t, mosaicBin, m.env, 24, 80, "--host", m.target, "run", "--quiet", "--workspace", ws, "--", "echo", "ran-there")
	if code := q.wait(); code != 0 || !strings.Contains(q.output(), "ran-there") || strings.Contains(q.output(), "Connection to") {
		t.Errorf("run on a terminal over --host: exit %d\n%q", code, q.output())
	}
}
