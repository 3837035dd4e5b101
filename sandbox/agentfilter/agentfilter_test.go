package agentfilter

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"net"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// rig is a keyring as the user's agent, with three keys, two host keys,
// and a filter lending one key to log in to host A and one only to sign.
type rig struct {
	keyring              agent.Agent
	login, signer, other ssh.Signer
	hostA, hostB         ssh.Signer
	filter               *Filter
	mu                   sync.Mutex
	uses                 []Use
}

// newSigner is a fresh ed25519 signer.
func newSigner(t *testing.T) (ssh.Signer, ed25519.PrivateKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, priv
}

// newRig makes the rig.
func newRig(t *testing.T) *rig {
	r := &rig{keyring: agent.NewKeyring()}
	for _, p := range []*ssh.Signer{&r.login, &r.signer, &r.other} {
		s, priv := newSigner(t)
		*p = s
		if err := r.keyring.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
			t.Fatal(err)
		}
	}
	r.hostA, _ = newSigner(t)
	r.hostB, _ = newSigner(t)
	r.filter = &Filter{
		Lent: []Lent{
			{Key: r.login.PublicKey(), Dests: []Dest{{Name: "git.example", Keys: []ssh.PublicKey{r.hostA.PublicKey()}}}},
			{Key: r.signer.PublicKey(), SignOnly: true},
		},
		Report: func(u Use) { r.mu.Lock(); r.uses = append(r.uses, u); r.mu.Unlock() },
	}
	return r
}

// client is an agent client speaking the protocol to a over a pipe.
func client(t *testing.T, a agent.Agent) agent.ExtendedAgent {
	t.Helper()
	c, s := net.Pipe()
	go func() { _ = agent.ServeAgent(a, s); s.Close() }()
	t.Cleanup(func() { c.Close() })
	return agent.NewClient(c)
}

// filtered is a client of a fresh filter connection; unfiltered one of the
// keyring itself (the forward with no filter, where every attack works).
func (r *rig) filtered(t *testing.T) agent.ExtendedAgent {
	return client(t, r.filter.NewConn(r.keyring.(agent.ExtendedAgent)))
}

// unfiltered is a client of the keyring itself.
func (r *rig) unfiltered(t *testing.T) agent.ExtendedAgent { return client(t, r.keyring) }

// last is the last Use reported.
func (r *rig) last() Use {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.uses) == 0 {
		return Use{Op: "(none)"}
	}
	return r.uses[len(r.uses)-1]
}

// userauth is the data an ssh client signs to log in with key on session sid.
func userauth(sid []byte, key ssh.PublicKey) []byte {
	return ssh.Marshal(userauthRequest{Session: sid, Type: 50, User: "git", Service: "ssh-connection",
		Method: "publickey", HasSig: true, Algorithm: key.Type(), PubKey: key.Marshal()})
}

// hostbound is userauth with OpenSSH's publickey-hostbound-v00 method,
// which names the server's host key too.
func hostbound(sid []byte, key, host ssh.PublicKey) []byte {
	return append(ssh.Marshal(userauthRequest{Session: sid, Type: 50, User: "git", Service: "ssh-connection",
		Method: methodHostbound, HasSig: true, Algorithm: key.Type(), PubKey: key.Marshal()}), ssh.Marshal(struct{ H []byte }{host.Marshal()})...)
}

// sshsig is the blob ssh-keygen -Y sign (git commit -S) signs for msg.
func sshsig(msg string) []byte {
	h := sha512.Sum512([]byte(msg))
	return append([]byte(sshsigMagic), ssh.Marshal(sshsigBlob{Namespace: "git", HashAlg: "sha512", Hash: h[:]})...)
}

// bindMsg is a session-bind@openssh.com for sid by host (signed by signer).
func bindMsg(t *testing.T, host, signer ssh.Signer, sid []byte, forwarding bool) []byte {
	t.Helper()
	sig, err := signer.Sign(rand.Reader, sid)
	if err != nil {
		t.Fatal(err)
	}
	return ssh.Marshal(sessionBind{HostKey: host.PublicKey().Marshal(), SessionID: sid, Signature: ssh.Marshal(sig), Forwarding: forwarding})
}

// TestListShowsOnlyLentKeys: the agent holds three keys; the session sees two.
func TestListShowsOnlyLentKeys(t *testing.T) {
	r := newRig(t)
	all, err := r.unfiltered(t).List()
	if err != nil || len(all) != 3 {
		t.Fatalf("unfiltered list: %d keys, %v; want 3", len(all), err)
	}
	keys, err := r.filtered(t).List()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Fatalf("filtered list: %d keys, want the 2 lent", len(keys))
	}
	for _, k := range keys {
		if string(k.Marshal()) == string(r.other.PublicKey().Marshal()) {
			t.Fatal("the unlent key is listed")
		}
	}
}

// TestAttacksRefused: each request works against the unfiltered agent
// (shown first, in the same loop) and is refused by the filter, with one
// refusal reported.
func TestAttacksRefused(t *testing.T) {
	sid := []byte("0123456789abcdef0123456789abcdef")
	cases := []struct {
		name string
		do   func(r *rig, a agent.ExtendedAgent) error
	}{
		{"sign with an unlent key", func(r *rig, a agent.ExtendedAgent) error {
			_, err := a.Sign(r.other.PublicKey(), sshsig("x"))
			return err
		}},
		{"add a key", func(r *rig, a agent.ExtendedAgent) error {
			_, priv := newSigner(t)
			return a.Add(agent.AddedKey{PrivateKey: priv})
		}},
		{"remove a key", func(r *rig, a agent.ExtendedAgent) error { return a.Remove(r.login.PublicKey()) }},
		{"remove all", func(r *rig, a agent.ExtendedAgent) error { return a.RemoveAll() }},
		{"lock", func(r *rig, a agent.ExtendedAgent) error { return a.Lock([]byte("pw")) }},
		{"signing-only key logs in", func(r *rig, a agent.ExtendedAgent) error {
			_, err := a.Sign(r.signer.PublicKey(), userauth(sid, r.signer.PublicKey()))
			return err
		}},
		{"login key logs in with no bind", func(r *rig, a agent.ExtendedAgent) error {
			_, err := a.Sign(r.login.PublicKey(), userauth(sid, r.login.PublicKey()))
			return err
		}},
		{"login key signs SSHSIG data", func(r *rig, a agent.ExtendedAgent) error {
			_, err := a.Sign(r.login.PublicKey(), sshsig("x"))
			return err
		}},
		{"login key logs in to another host", func(r *rig, a agent.ExtendedAgent) error {
			if _, err := a.Extension("session-bind@openssh.com", bindMsg(t, r.hostB, r.hostB, sid, false)); err != nil && err != agent.ErrExtensionUnsupported {
				return err
			}
			_, err := a.Sign(r.login.PublicKey(), userauth(sid, r.login.PublicKey()))
			return err
		}},
		{"login for another session than the bound one", func(r *rig, a agent.ExtendedAgent) error {
			if _, err := a.Extension("session-bind@openssh.com", bindMsg(t, r.hostA, r.hostA, sid, false)); err != nil && err != agent.ErrExtensionUnsupported {
				return err
			}
			_, err := a.Sign(r.login.PublicKey(), userauth([]byte("another session"), r.login.PublicKey()))
			return err
		}},
		{"hostbound login naming another host key than the bound one", func(r *rig, a agent.ExtendedAgent) error {
			if _, err := a.Extension("session-bind@openssh.com", bindMsg(t, r.hostA, r.hostA, sid, false)); err != nil && err != agent.ErrExtensionUnsupported {
				return err
			}
			_, err := a.Sign(r.login.PublicKey(), hostbound(sid, r.login.PublicKey(), r.hostB.PublicKey()))
			return err
		}},
		{"signing key signs through a forwarded agent", func(r *rig, a agent.ExtendedAgent) error {
			if _, err := a.Extension("session-bind@openssh.com", bindMsg(t, r.hostA, r.hostA, sid, true)); err != nil && err != agent.ErrExtensionUnsupported {
				return err
			}
			_, err := a.Sign(r.signer.PublicKey(), sshsig("x"))
			return err
		}},
		{"signing key signs a file (SSHSIG namespace file, not git)", func(r *rig, a agent.ExtendedAgent) error {
			h := sha512.Sum512([]byte("release.tar.gz"))
			_, err := a.Sign(r.signer.PublicKey(), append([]byte(sshsigMagic), ssh.Marshal(sshsigBlob{Namespace: "file", HashAlg: "sha512", Hash: h[:]})...))
			return err
		}},
		{"login through a forwarded agent", func(r *rig, a agent.ExtendedAgent) error {
			if _, err := a.Extension("session-bind@openssh.com", bindMsg(t, r.hostA, r.hostA, sid, true)); err != nil && err != agent.ErrExtensionUnsupported {
				return err
			}
			_, err := a.Sign(r.login.PublicKey(), userauth(sid, r.login.PublicKey()))
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			if err := c.do(r, r.unfiltered(t)); err != nil {
				t.Fatalf("against the unfiltered agent: %v (the attack should work there)", err)
			}
			r = newRig(t)
			if err := c.do(r, r.filtered(t)); err == nil {
				t.Fatal("the filter let it through")
			}
			if u := r.last(); u.Allowed || u.Why == "" {
				t.Fatalf("last use reported %+v, want a refusal with why", u)
			}
		})
	}
}

// TestBindForgedRefused: a bind whose session identifier is signed by
// another key than the host key it names is refused, and the login after
// it too.
func TestBindForgedRefused(t *testing.T) {
	r := newRig(t)
	a := r.filtered(t)
	sid := []byte("session")
	if _, err := a.Extension("session-bind@openssh.com", bindMsg(t, r.hostA, r.hostB, sid, false)); err == nil {
		t.Fatal("a bind signed by another key was taken")
	}
	if _, err := a.Sign(r.login.PublicKey(), userauth(sid, r.login.PublicKey())); err == nil {
		t.Fatal("a login after a forged bind was signed")
	}
}

// TestAllowed: what a lent key is lent for works, and is reported once.
func TestAllowed(t *testing.T) {
	r := newRig(t)
	a := r.filtered(t)
	sig, err := a.Sign(r.signer.PublicKey(), sshsig("commit"))
	if err != nil {
		t.Fatalf("SSHSIG with the signing key: %v", err)
	}
	if err := r.signer.PublicKey().Verify(sshsig("commit"), sig); err != nil {
		t.Fatal(err)
	}
	if u := r.last(); !u.Allowed || !strings.Contains(u.String(), ssh.FingerprintSHA256(r.signer.PublicKey())) {
		t.Fatalf("reported %v", u)
	}
	sid := []byte("0123456789abcdef0123456789abcdef")
	if _, err := a.Extension("session-bind@openssh.com", bindMsg(t, r.hostA, r.hostA, sid, false)); err != nil {
		t.Fatalf("bind to host A: %v", err)
	}
	if _, err := a.Sign(r.login.PublicKey(), userauth(sid, r.login.PublicKey())); err != nil {
		t.Fatalf("login to host A: %v", err)
	}
	if u := r.last(); !u.Allowed || u.Dest != "git.example" {
		t.Fatalf("reported %v", u)
	}
	if _, err := a.Sign(r.login.PublicKey(), hostbound(sid, r.login.PublicKey(), r.hostA.PublicKey())); err != nil {
		t.Fatalf("hostbound login to host A: %v", err)
	}
	if _, err := a.Extension("query", nil); err == nil {
		t.Fatal("another extension passed")
	}
}

// TestRealClientWithoutBindRefused: x/crypto's ssh client does not send
// session-bind@openssh.com, so its login with a destination-bound key
// through the filter fails, at a real handshake; the same client through
// the unfiltered agent logs in.
func TestRealClientWithoutBindRefused(t *testing.T) {
	r := newRig(t)
	login := func(a agent.ExtendedAgent) error {
		cfg := &ssh.ServerConfig{PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) { return nil, nil }}
		cfg.AddHostKey(r.hostA)
		c, s := tcpPair(t)
		defer c.Close()
		go func() {
			defer s.Close()
			if sc, _, _, err := ssh.NewServerConn(s, cfg); err == nil {
				sc.Close()
			}
		}()
		signers, err := a.Signers()
		if err != nil {
			return err
		}
		var login []ssh.Signer
		for _, sg := range signers {
			if string(sg.PublicKey().Marshal()) == string(r.login.PublicKey().Marshal()) {
				login = append(login, sg)
			}
		}
		conn, _, _, err := ssh.NewClientConn(c, "git.example:22", &ssh.ClientConfig{User: "git",
			Auth: []ssh.AuthMethod{ssh.PublicKeys(login...)}, HostKeyCallback: ssh.FixedHostKey(r.hostA.PublicKey())})
		if err == nil {
			conn.Close()
		}
		return err
	}
	if err := login(r.unfiltered(t)); err != nil {
		t.Fatalf("unfiltered: %v", err)
	}
	if err := login(r.filtered(t)); err == nil {
		t.Fatal("a client that sent no bind logged in with a destination-bound key")
	}
	if u := r.last(); u.Allowed || !strings.Contains(u.Why, "not bound") {
		t.Fatalf("reported %v", u)
	}
}

// tcpPair is two ends of a loopback TCP connection (net.Pipe does not
// buffer, and both ends of an ssh handshake write first).
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}
