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
	signers := filepath.Join(dir, "allowed_signers")
	must(t, os.WriteFile(signers, []byte("t@example.org "+string(signPub)), 0o600))
	v := exec.Command("git", "-C", filepath.Join(ws, "repo"), "-c", "gpg.ssh.allowedSignersFile="+signers, "verify-commit", "HEAD")
	if out, err := v.CombinedOutput(); err != nil {
		t.Fatalf("the session's signed commit does not verify on the host: %v\n%s", err, out)
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
