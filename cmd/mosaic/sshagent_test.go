package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// userAgent starts an ssh-agent of the test's own on a socket under the
// home (which --ro may show a session), holding the keys given.
func userAgent(t *testing.T, keys ...string) string {
	t.Helper()
	sock := filepath.Join(workspace(t), "agent.sock")
	cmd := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := cmd.Start(); err != nil {
		t.Skipf("needs ssh-agent: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("ssh-agent did not listen")
		}
	}
	for _, k := range keys {
		add := exec.Command("ssh-add", k)
		add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
		if out, err := add.CombinedOutput(); err != nil {
			t.Fatalf("ssh-add %s: %v\n%s", k, err, out)
		}
	}
	return sock
}

// TestLendSSHKey: a key lent to log in to a real sshd logs in from inside
// the session; a key lent only to sign does not log in, but signs a commit
// that verifies on the host; neither the unlent key nor adding a key
// passes. Each refusal is first shown to work against the user's agent
// forwarded unfiltered (its socket bound in, SSH_AUTH_SOCK at it).
func TestLendSSHKey(t *testing.T) {
	r := startSSHD(t, false)
	dir := filepath.Dir(strings.TrimPrefix(r.env[0], "MOSAIC_SSH="))
	keygen := func(path string) {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", path).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	keygen(filepath.Join(dir, "sign_key"))
	signPub, _ := os.ReadFile(filepath.Join(dir, "sign_key.pub"))
	auth, _ := os.ReadFile(filepath.Join(dir, "authorized_keys"))
	must(t, os.WriteFile(filepath.Join(dir, "authorized_keys"), append(auth, signPub...), 0o600))
	sock := userAgent(t, filepath.Join(dir, "user_key"), filepath.Join(dir, "sign_key"))
	port := strings.TrimSpace(string(must1(os.ReadFile(filepath.Join(dir, "sshd_config")))))
	port = strings.Fields(strings.Split(port, "\n")[1])[1]
	// The system's ssh_config (and its ssh_config.d, where systemd 256+
	// puts a file of root's) is read as it is: on the 257 rig this failed
	// with "Bad owner or permissions on
	// /etc/ssh/ssh_config.d/20-systemd-ssh-proxy.conf" before
	// sandbox.SSHConfigCopy.
	ssh := fmt.Sprintf("ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -p %s", port)
	dest := " " + os.Getenv("USER") + "@127.0.0.1 true"
	login := ssh + dest
	env := []string{"SSH_AUTH_SOCK=" + sock}
	ws := workspace(t)
	lend := []string{"run", "--network", "host", "-w", ws,
		"--lend-ssh-key", filepath.Join(dir, "user_key.pub") + "=" + filepath.Join(dir, "host_key.pub"),
		"--lend-ssh-sign", filepath.Join(dir, "sign_key.pub"), "--"}
	forward := []string{"run", "--network", "host", "-w", ws, "--ro", filepath.Dir(sock), "--env", "SSH_AUTH_SOCK=" + sock, "--"}
	// ssh-add -l lists 2 keys in either; logging in with the signing key
	// only (its agent key filtered by ssh's IdentityAgent, IdentitiesOnly).
	signLogin := ssh + " -o IdentitiesOnly=yes -i " + filepath.Join(ws, "sign.pub") + dest
	must(t, os.WriteFile(filepath.Join(ws, "sign.pub"), signPub, 0o600))
	if res := mosaicWith(t, env, "", append(forward, "sh", "-c", signLogin)...); res.code != 0 {
		t.Fatalf("unfiltered: the signing key did not log in (the attack should work there): %+v", res)
	}
	if res := mosaicWith(t, env, "", append(forward, "ssh-add", "-D")...); res.code != 0 {
		t.Fatalf("unfiltered: ssh-add -D failed: %+v", res)
	}
	sock = userAgent(t, filepath.Join(dir, "user_key"), filepath.Join(dir, "sign_key"))
	env = []string{"SSH_AUTH_SOCK=" + sock}
	if res := mosaicWith(t, env, "", append(lend, "sh", "-c", login)...); res.code != 0 {
		t.Fatalf("lent: the login key did not log in: %+v", res)
	}
	keygen(filepath.Join(dir, "other_host"))
	elsewhere := append([]string{}, lend...)
	elsewhere[6] = filepath.Join(dir, "user_key.pub") + "=" + filepath.Join(dir, "other_host.pub")
	// Both refused by the filter at the login (ssh's own message), not
	// before the session started.
	if res := mosaicWith(t, env, "", append(elsewhere, "sh", "-c", login)...); res.code == 0 || !strings.Contains(res.stderr, "Permission denied") {
		t.Fatalf("lent for another host: the login key logged in to this one, or never tried: %+v", res)
	}
	if res := mosaicWith(t, env, "", append(lend, "sh", "-c", signLogin)...); res.code == 0 || !strings.Contains(res.stderr, "Permission denied") {
		t.Fatalf("lent: the signing-only key logged in, or never tried: %+v", res)
	}
	if res := mosaicWith(t, env, "", append(lend, "ssh-add", "-D")...); res.code == 0 {
		t.Fatalf("lent: ssh-add -D passed: %+v", res)
	}
	commit := "git init -q repo && cd repo && git -c user.email=t@example.org -c user.name=t commit -q --allow-empty -m signed && git cat-file commit HEAD"
	name := "lend-" + randomHex()
	named := append([]string{"run", "--direct", "--name", name}, lend[1:]...) // the repository it makes is checked on the host
	// Signing needs no network: the filter's socket is a path, reached
	// from the session's own network namespace (--network none) too.
	if named[4] != "--network" {
		t.Fatalf("the lend arguments moved: %q", named)
	}
	named[5] = "none"
	res := mosaicWith(t, env, "", append(named, "sh", "-c", commit)...)
	if res.code != 0 || !strings.Contains(res.stdout, "BEGIN SSH SIGNATURE") {
		t.Fatalf("lent: git commit -S: %+v", res)
	}
	t.Cleanup(func() { mosaic(t, "rm", name) })
	if st := mosaic(t, "status", name); !strings.Contains(st.stdout, "ssh keys:") || !strings.Contains(st.stdout, "to sign only") {
		t.Errorf("status does not say which keys were lent: %+v", st)
	}
	if au := mosaic(t, "audit", name); !strings.Contains(au.stdout, "ssh-agent-allowed") || !strings.Contains(au.stdout, "SSHSIG") {
		t.Errorf("the signature is not in the session's audit: %+v", au)
	}
	// Verified on the host against the lent key, and only it: the same
	// check with another key as the allowed signer fails (a good
	// signature of no allowed principal; gpg.minTrustLevel=fully refuses
	// it in every git, not only where git fails an unmatched principal).
	verify := func(pub []byte) ([]byte, error) {
		signers := filepath.Join(dir, "allowed_signers")
		must(t, os.WriteFile(signers, []byte("t@example.org "+string(pub)), 0o600))
		return exec.Command("git", "-C", filepath.Join(ws, "repo"), "-c", "gpg.ssh.allowedSignersFile="+signers,
			"-c", "gpg.minTrustLevel=fully", "verify-commit", "HEAD").CombinedOutput()
	}
	if out, err := verify(must1(os.ReadFile(filepath.Join(dir, "other_host.pub")))); err == nil {
		t.Fatalf("the signed commit verifies against another key (the check would pass anything):\n%s", out)
	}
	if out, err := verify(signPub); err != nil || !strings.Contains(string(out), `signature for t@example.org`) {
		t.Fatalf("the session's signed commit does not verify on the host with the lent key: %v\n%s", err, out)
	}
}

// must1 is v, failing on err.
func must1[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestLendSSHKeyBadInput: a key the agent does not hold is bad input
// (exit 2), no agent a refusal (exit 3), each one line, and no session;
// so is a lent key where lending is not available (--sandbox landlock,
// --scope: bad-ssh-lend) and with --host, where ssh is not even run.
func TestLendSSHKeyBadInput(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "k")).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	sock := userAgent(t)
	name := "lend-" + randomHex()
	held := userAgent(t, filepath.Join(dir, "k")) // the key is there: only the mode is refused
	ssh := filepath.Join(dir, "ssh")
	must(t, os.WriteFile(ssh, []byte("#!/bin/sh\ntouch "+filepath.Join(dir, "ssh-ran")+"\nexit 255\n"), 0o700))
	cases := []struct {
		env   []string
		flags []string
		code  int
		want  string
	}{
		{[]string{"SSH_AUTH_SOCK=" + sock}, nil, 2, "bad-ssh-lend"},
		{[]string{"SSH_AUTH_SOCK=" + filepath.Join(dir, "none.sock")}, nil, 3, "no-ssh-agent"},
		{[]string{"SSH_AUTH_SOCK="}, nil, 3, "no-ssh-agent"},
		{[]string{"SSH_AUTH_SOCK=" + held}, []string{"--sandbox", "landlock"}, 2, "not available with --sandbox landlock"},
		{[]string{"SSH_AUTH_SOCK=" + held}, []string{"--scope", "--direct"}, 2, "not available with --scope"},
		{[]string{"SSH_AUTH_SOCK=" + held, "MOSAIC_SSH=" + ssh}, []string{"--host", "nowhere.invalid"}, 2, "not available with --host"},
	}
	for _, c := range cases {
		args := []string{"run", "--json", "--name", name, "-w", workspace(t), "--lend-ssh-sign", filepath.Join(dir, "k.pub"), "--", "true"}
		if len(c.flags) > 0 && c.flags[0] == "--host" {
			args = append(c.flags, args...) // --host goes first
		} else {
			args = append(append([]string{"run"}, c.flags...), args[1:]...)
		}
		res := mosaicWith(t, c.env, "", args...)
		if res.code != c.code || !strings.Contains(res.stdout+res.stderr, c.want) {
			t.Fatalf("%v %v: exit %d, want %d with %s: %+v", c.env, c.flags, res.code, c.code, c.want, res)
		}
		if lines := strings.Split(strings.TrimSpace(res.stderr), "\n"); len(lines) > 1 {
			t.Errorf("%v %v: more than one line: %q", c.env, c.flags, res.stderr)
		}
		if st := mosaic(t, "status", name); st.code == 0 {
			t.Fatalf("%v: a session was started: %+v", c.env, st)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ssh-ran")); err == nil {
		t.Error("--host with a lent key ran ssh")
	}
}

// TestLendSSHKeyAgentRequests: through OpenSSH's own tools in a session,
// against a real ssh-agent holding a key that is not lent, every request
// beyond the lent keys' use works when the agent is forwarded unfiltered
// (its socket bound in, SSH_AUTH_SOCK at it) and is refused through the
// filter: listing the unlent key, signing with it (ssh-keygen -Y sign),
// adding a key, removing one, locking the agent. The agent still holds its
// three keys after the filtered session.
func TestLendSSHKeyAgentRequests(t *testing.T) {
	// The agent's keys out of the session's reach (ssh-keygen -Y sign -f
	// K.pub falls back to the private key beside K.pub when the agent
	// refuses): only their public halves in the workspace.
	ws, keys := workspace(t), t.TempDir()
	keygen := func(dir, name string) string {
		path := filepath.Join(dir, name)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", path).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
		must(t, os.WriteFile(filepath.Join(ws, name+".pub"), must1(os.ReadFile(path+".pub")), 0o600))
		return path
	}
	login, sign, other, host := keygen(keys, "login"), keygen(keys, "sign"), keygen(keys, "other"), keygen(keys, "host")
	keygen(ws, "new") // the key the session tries to add
	must(t, os.WriteFile(filepath.Join(ws, "msg"), []byte("to sign\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(ws, "pw.sh"), []byte("#!/bin/sh\necho lock-pw\n"), 0o700))
	script := `step() { n=$1; shift; "$@" >/dev/null 2>&1; echo "$n=$?"; }
	echo "listed=$(ssh-add -l | grep -c SHA256)"
	echo "other-listed=$(ssh-add -l | grep -c ' other ')"
	step sign-other ssh-keygen -Y sign -f other.pub -n git msg
	step add ssh-add new
	step remove ssh-add -d login.pub
	SSH_ASKPASS="$PWD/pw.sh" SSH_ASKPASS_REQUIRE=force step lock ssh-add -x`
	run := func(lent bool) map[string]string {
		t.Helper()
		sock := userAgent(t, login, sign, other)
		env := []string{"SSH_AUTH_SOCK=" + sock}
		args := []string{"run", "--direct", "-w", ws, "--ro", filepath.Dir(sock), "--env", "SSH_AUTH_SOCK=" + sock, "--", "sh", "-c", script}
		if lent {
			args = []string{"run", "--direct", "-w", ws, "--lend-ssh-key", login + ".pub=" + host + ".pub", "--lend-ssh-sign", sign + ".pub", "--", "sh", "-c", script}
		}
		os.Remove(filepath.Join(ws, "msg.sig"))
		res := mosaicWith(t, env, "", args...)
		if res.code != 0 {
			t.Fatalf("lent %v: %+v", lent, res)
		}
		got := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
			k, v, _ := strings.Cut(l, "=")
			got[k] = v
		}
		if lent {
			list := exec.Command("ssh-add", "-l")
			list.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
			if out, _ := list.CombinedOutput(); strings.Count(string(out), "SHA256:") != 3 {
				t.Errorf("the agent lost keys to the filtered session:\n%s", out)
			}
		}
		return got
	}
	open := run(false)
	want := map[string]string{"listed": "3", "other-listed": "1", "sign-other": "0", "add": "0", "remove": "0", "lock": "0"}
	for k, v := range want {
		if open[k] != v {
			t.Fatalf("unfiltered: %s=%s, want %s (the request should work there): %v", k, open[k], v, open)
		}
	}
	lent := run(true)
	if lent["listed"] != "2" || lent["other-listed"] != "0" {
		t.Errorf("through the filter the session lists %s keys (%s unlent), want the 2 lent: %v", lent["listed"], lent["other-listed"], lent)
	}
	for _, k := range []string{"sign-other", "add", "remove", "lock"} {
		if lent[k] == "0" || lent[k] == "" {
			t.Errorf("through the filter, %s passed (or never ran): %v", k, lent)
		}
	}
}

// TestSSHConfigInside: ssh reads the system's configuration in a session,
// a service and a scope, with the same snippets as the host's, which the
// session cannot change. On systemd 256+ (the 257 rig), whose
// 20-systemd-ssh-proxy.conf is root's, ssh exited at once ("Bad owner or
// permissions") before sandbox.SSHConfigCopy; the host rig (Debian 12)
// has no snippet, so there it shows only that nothing broke. Checked: with
// the copy taken out (complete sets no SSHConfig) both fail on 257, exit 9.
func TestSSHConfigInside(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("needs ssh")
	}
	script := `for f in /etc/ssh/ssh_config.d/*; do [ -f "$f" ] && cat "$f"; done
	ssh -G example.invalid >/dev/null || exit 9
	for f in /etc/ssh/ssh_config.d/*; do [ -f "$f" ] && (: >>"$f") 2>/dev/null && exit 8; done
	exit 0`
	var host strings.Builder
	entries, _ := os.ReadDir("/etc/ssh/ssh_config.d")
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join("/etc/ssh/ssh_config.d", e.Name())); err == nil {
			host.Write(b)
		}
	}
	for _, mode := range [][]string{{"run"}, {"run", "--scope", "--direct"}} {
		res := mosaic(t, append(mode, "-w", workspace(t), "--", "sh", "-c", script)...)
		if res.code != 0 || res.stdout != host.String() {
			t.Errorf("%v: exit %d (9: ssh refused its config, 8: a snippet writable), snippets %q, want the host's %q: %s", mode, res.code, res.stdout, host.String(), res.stderr)
		}
	}
}
