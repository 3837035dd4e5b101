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

	"mosaic/credentials"
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
		{"no agent of the caller's (the bus, --host)", Request{LendSSHSign: []string{fp}, NoAgent: "the bus has none"}, sock, sandbox.ModeBwrap, "bad-ssh-lend", 0},
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

// TestSSHLendsAsked: a profile's LendSSHKey= and LendSSHSign= join the
// flags' lends; a --lend-ssh-key of the same key wins over the profile's
// line, a --lend-ssh-sign over its signing key; the profile's signing key
// is lent (the agent holds it) as a flag's would be, and refused, naming
// the profile, where the caller's agent is not (NoAgent).
func TestSSHLendsAsked(t *testing.T) {
	p := credentials.Profile{Name: "mine", LendSSHKey: []string{"SHA256:a=git.example", "SHA256:b=git.example"}, LendSSHSign: "SHA256:s"}
	got := sshLendsAsked(Request{LendSSHKey: []string{"SHA256:a=other.example"}}, p)
	if strings.Join(got.LendSSHKey, " ") != "SHA256:a=other.example SHA256:b=git.example" || strings.Join(got.LendSSHSign, " ") != "SHA256:s" {
		t.Errorf("merged: keys %v, sign %v", got.LendSSHKey, got.LendSSHSign)
	}
	if got := sshLendsAsked(Request{LendSSHSign: []string{"SHA256:t"}}, p); strings.Join(got.LendSSHSign, " ") != "SHA256:t" {
		t.Errorf("a --lend-ssh-sign beside the profile's: %v", got.LendSSHSign)
	}
	if got := sshLendsAsked(Request{}, credentials.Profile{Name: "plain"}); got.profileSSH != "" || got.LendSSHKey != nil {
		t.Errorf("a profile that lends nothing: %+v", got)
	}

	sock, key := testAgent(t)
	signing := credentials.Profile{Name: "signer", LendSSHSign: ssh.FingerprintSHA256(key)}
	spec := units.Spec{Sandbox: sandbox.ModeBwrap, BwrapBin: "/usr/bin/bwrap"}
	if err := sshAgentOf(&spec, sshLendsAsked(Request{}, signing), Paths{Home: t.TempDir()}, sock); err != nil {
		t.Fatal(err)
	}
	if spec.SSHAgent == nil || len(spec.SSHAgent.Lent) != 1 || !spec.SSHAgent.Lent[0].SignOnly || !strings.Contains(spec.GitConfig, "gpgsign") {
		t.Errorf("the profile's signing key was not lent: %+v", spec.SSHAgent)
	}
	spec = units.Spec{Sandbox: sandbox.ModeBwrap, BwrapBin: "/usr/bin/bwrap"}
	err := sshAgentOf(&spec, sshLendsAsked(Request{NoAgent: "the bus has no ssh agent of yours to lend"}, signing), Paths{Home: t.TempDir()}, sock)
	if errcode.Of(err).Code != "bad-ssh-lend" || !strings.Contains(err.Error(), "profile signer's") || spec.SSHAgent != nil {
		t.Errorf("through the bus: %v", err)
	}
}
