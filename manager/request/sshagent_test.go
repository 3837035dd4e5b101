package request

import (
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"mosaic/internal/errcode"
	"mosaic/sandbox"
	"mosaic/units"
)

// testAgent serves a keyring holding one new key on a socket, and returns
// the socket and the key.
func testAgent(t *testing.T) (string, ssh.PublicKey) {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	kr := agent.NewKeyring()
	if err := kr.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = agent.ServeAgent(kr, c); c.Close() }()
		}
	}()
	pub, _ := ssh.NewPublicKey(priv.Public())
	return sock, pub
}

// TestSSHAgentOf: what --lend-ssh-key and --lend-ssh-sign refuse (an
// unknown key, a host known_hosts does not know, no agent) and what a lent
// signing key writes into the session's spec.
func TestSSHAgentOf(t *testing.T) {
	sock, key := testAgent(t)
	home := t.TempDir()
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostKey, _ := ssh.NewPublicKey(hostPriv.Public())
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	must(os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), append([]byte("git.example "), ssh.MarshalAuthorizedKey(hostKey)...), 0o600))
	fp := ssh.FingerprintSHA256(key)
	other := "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	for _, tc := range []struct {
		name     string
		req      Request
		sock     string
		mode     string
		code     string
		hostKeys int
	}{
		{"none lent", Request{}, "", sandbox.ModeBwrap, "", 0},
		{"login to a known host", Request{LendSSHKey: []string{fp + "=git.example"}}, sock, sandbox.ModeBwrap, "", 1},
		{"sign", Request{LendSSHSign: []string{fp}}, sock, sandbox.ModeBwrap, "", 0},
		{"no agent", Request{LendSSHSign: []string{fp}}, "", sandbox.ModeBwrap, "no-ssh-agent", 0},
		{"relative agent path", Request{LendSSHSign: []string{fp}}, "agent.sock", sandbox.ModeBwrap, "no-ssh-agent", 0},
		{"dead agent", Request{LendSSHSign: []string{fp}}, sock + ".gone", sandbox.ModeBwrap, "no-ssh-agent", 0},
		{"unknown key", Request{LendSSHSign: []string{other}}, sock, sandbox.ModeBwrap, "bad-ssh-lend", 0},
		{"login without a host", Request{LendSSHKey: []string{fp}}, sock, sandbox.ModeBwrap, "bad-ssh-lend", 0},
		{"unknown host", Request{LendSSHKey: []string{fp + "=elsewhere.example"}}, sock, sandbox.ModeBwrap, "bad-ssh-lend", 0},
		{"two signing keys", Request{LendSSHSign: []string{fp, fp}}, sock, sandbox.ModeBwrap, "bad-ssh-lend", 0},
		{"landlock", Request{LendSSHSign: []string{fp}}, sock, sandbox.ModeLandlock, "bad-ssh-lend", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := units.Spec{Sandbox: tc.mode, BwrapBin: "/usr/bin/bwrap"}
			err := sshAgentOf(&spec, tc.req, Paths{Home: home}, tc.sock)
			if tc.code != "" {
				if err == nil || errcode.Of(err).Code != tc.code {
					t.Fatalf("got %v, want %s", err, tc.code)
				}
				if spec.SSHAgent != nil || len(spec.Env) != 0 {
					t.Fatalf("refused, yet the spec changed: %+v", spec)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.req.LendSSHKey)+len(tc.req.LendSSHSign) == 0 {
				if spec.SSHAgent != nil {
					t.Fatal("a filter with nothing lent")
				}
				return
			}
			if spec.SSHAgent == nil || spec.SSHAgent.Upstream != tc.sock || len(spec.SSHAgent.Lent) != 1 {
				t.Fatalf("spec's agent: %+v", spec.SSHAgent)
			}
			if l := spec.SSHAgent.Lent[0]; len(tc.req.LendSSHKey) > 0 && (len(l.Dests) != 1 || len(l.Dests[0].Keys) != tc.hostKeys || ssh.FingerprintSHA256(l.Dests[0].Keys[0]) != ssh.FingerprintSHA256(hostKey)) {
				t.Fatalf("destinations: %+v", l.Dests)
			}
			if !strings.Contains(strings.Join(spec.Env, " "), "SSH_AUTH_SOCK=/run/mosaic/ssh-agent/") {
				t.Fatalf("env: %v", spec.Env)
			}
			signing := len(tc.req.LendSSHSign) > 0
			if got := strings.Contains(spec.GitConfig, "key::ssh-ed25519 ") && strings.Contains(spec.GitConfig, "format = ssh") && strings.Contains(spec.GitConfig, "gpgsign = true"); got != signing || (signing && !strings.HasPrefix(spec.GitConfig, GitConfigHeader)) {
				t.Fatalf("gitconfig:\n%s", spec.GitConfig)
			}
		})
	}
}
