// Package agentfilter is the ssh agent a session is lent: a filter that
// runs on the host, outside the session, between the session's ssh and git
// and the user's own agent (SSH_AUTH_SOCK). Its input is the session's, so
// it trusts none of it: it lists only the keys lent, signs only with them,
// a signing-only key only SSHSIG data (git's ssh commit signing) and never
// an ssh login, and a destination-bound key only an ssh login whose
// connection was bound (session-bind@openssh.com, verified) to a host key
// of a named destination. No other agent operation passes (adding,
// removing, locking, any other extension). The agent protocol is
// golang.org/x/crypto/ssh/agent's; every use and refusal is reported, once.
package agentfilter

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"mosaic/internal/acceptloop"
)

// Dest is a destination a key is lent for: its name (a host, as the user
// named it) and its host keys (its known_hosts lines', resolved when the
// session starts; certificate authorities and revocations are not read).
type Dest struct {
	Name string
	Keys []ssh.PublicKey
}

// hasKey tells whether key is one of d's host keys.
func (d Dest) hasKey(key ssh.PublicKey) bool {
	for _, k := range d.Keys {
		if bytes.Equal(k.Marshal(), key.Marshal()) {
			return true
		}
	}
	return false
}

// Lent is one key lent to a session: either only to sign (SSHSIG data:
// commit signing) or only to log in to Dests.
type Lent struct {
	Key      ssh.PublicKey
	Comment  string
	SignOnly bool
	Dests    []Dest
}

// Use is one request the filter answered: the key's fingerprint (empty
// when the request names none), the destination it was for (if known),
// the operation, and whether it was allowed, with why not.
type Use struct {
	Fingerprint string
	Dest        string
	Op          string
	Allowed     bool
	Why         string
}

// String is a Use as one log line.
func (u Use) String() string {
	verdict := "allowed"
	if !u.Allowed {
		verdict = "refused: " + u.Why
	}
	s := "ssh agent " + u.Op
	if u.Fingerprint != "" {
		s += " key " + u.Fingerprint
	}
	if u.Dest != "" {
		s += " for " + u.Dest
	}
	return s + " " + verdict
}

// Filter is the policy, shared by all the session's connections; each
// connection gets its own Conn (an ssh connection's bind is the agent
// connection's own).
type Filter struct {
	Lent []Lent
	// Report is called once for every request answered.
	Report func(Use)
}

// ErrRefused is what a refused request returns (the session's ssh sees a
// plain SSH_AGENT_FAILURE).
var ErrRefused = errors.New("refused by mosaic's agent filter")

// bind is one session-bind@openssh.com the connection's client sent.
type bind struct {
	hostKey    ssh.PublicKey
	sessionID  []byte
	forwarding bool
}

// Conn is the filter on one agent connection: an agent.ExtendedAgent in
// front of the upstream agent, holding the connection's binds.
type Conn struct {
	f        *Filter
	upstream agent.ExtendedAgent
	binds    []bind
}

// NewConn is the filter for one connection to upstream.
func (f *Filter) NewConn(upstream agent.ExtendedAgent) *Conn {
	return &Conn{f: f, upstream: upstream}
}

// MaxConns bounds the session's agent connections served at once (each
// holds one to the user's agent); one more is closed at once.
const MaxConns = 32

// Serve answers the agent protocol on ln until it fails, each connection
// with a connection of its own to the upstream agent dial gives.
func (f *Filter) Serve(ln net.Listener, dial func() (net.Conn, error)) error {
	slots := make(chan struct{}, MaxConns)
	return acceptloop.Serve(ln, func(c net.Conn) {
		select {
		case slots <- struct{}{}:
			go func() { f.serveConn(c, dial); <-slots }()
		default:
			f.report(Use{Op: "connect", Why: fmt.Sprintf("more than %d connections at once", MaxConns)})
			c.Close()
		}
	})
}

// serveConn serves one session connection, through one upstream
// connection of its own.
func (f *Filter) serveConn(c net.Conn, dial func() (net.Conn, error)) {
	defer c.Close()
	up, err := dial()
	if err != nil {
		f.report(Use{Op: "connect", Why: "the user's agent: " + err.Error()})
		return
	}
	defer up.Close()
	_ = agent.ServeAgent(f.NewConn(agent.NewClient(up)), c)
}

// report hands u to Report.
func (f *Filter) report(u Use) {
	if f.Report != nil {
		f.Report(u)
	}
}

// refuse reports a refusal and returns ErrRefused.
func (c *Conn) refuse(u Use, why string) error {
	u.Allowed, u.Why = false, why
	c.f.report(u)
	return ErrRefused
}

// lent is the lent key of this public key, or nil.
func (c *Conn) lent(key ssh.PublicKey) *Lent {
	blob := key.Marshal()
	for i := range c.f.Lent {
		if bytes.Equal(c.f.Lent[i].Key.Marshal(), blob) {
			return &c.f.Lent[i]
		}
	}
	return nil
}

// List lists the lent keys the upstream agent holds, and no other.
func (c *Conn) List() ([]*agent.Key, error) {
	keys, err := c.upstream.List()
	if err != nil {
		return nil, c.refuse(Use{Op: "list"}, "the user's agent: "+err.Error())
	}
	var out []*agent.Key
	for _, k := range keys {
		if c.lent(k) != nil {
			out = append(out, k)
		}
	}
	c.f.report(Use{Op: fmt.Sprintf("list (%d of the agent's %d keys shown)", len(out), len(keys)), Allowed: true})
	return out, nil
}

// Sign is SignWithFlags with no flags.
func (c *Conn) Sign(key ssh.PublicKey, data []byte) (*ssh.Signature, error) {
	return c.SignWithFlags(key, data, 0)
}

// SignWithFlags signs data with a lent key, if what data is fits how the
// key was lent: SSHSIG data for a signing-only key, an ssh login on a
// connection bound to one of its destinations for the others.
func (c *Conn) SignWithFlags(key ssh.PublicKey, data []byte, flags agent.SignatureFlags) (*ssh.Signature, error) {
	fp := ssh.FingerprintSHA256(key)
	l := c.lent(key)
	if l == nil {
		return nil, c.refuse(Use{Fingerprint: fp, Op: "sign"}, "the key is not lent to this session")
	}
	for _, b := range c.binds {
		if b.forwarding {
			return nil, c.refuse(Use{Fingerprint: fp, Op: "sign", Dest: "host key " + ssh.FingerprintSHA256(b.hostKey)},
				"the agent was forwarded onward (ssh -A), which a lent key does not follow")
		}
	}
	var u Use
	var err error
	if l.SignOnly {
		u, err = c.checkSSHSIG(fp, data)
	} else {
		u, err = c.checkLogin(l, fp, key, data)
	}
	if err != nil {
		return nil, err
	}
	sig, err := c.upstream.SignWithFlags(key, data, flags)
	if err != nil {
		return nil, c.refuse(u, "the user's agent: "+err.Error())
	}
	u.Allowed = true
	c.f.report(u)
	return sig, nil
}

// sshsigMagic starts every blob an SSHSIG signature signs
// (OpenSSH's PROTOCOL.sshsig: the six bytes, then the namespace, reserved,
// hash algorithm and hash as strings); an ssh login's data starts with the
// length of a session identifier, which these bytes are not.
const sshsigMagic = "SSHSIG"

// sshsigBlob is what follows the magic in a blob to sign.
type sshsigBlob struct {
	Namespace string
	Reserved  string
	HashAlg   string
	Hash      []byte
}

// checkSSHSIG lets a signing-only key sign SSHSIG data in git's namespace
// only: what git signs commits and tags with, not a file or anything else
// a verifier of the user's signatures would take for theirs
// (ssh-keygen -Y sign -n file).
func (c *Conn) checkSSHSIG(fp string, data []byte) (Use, error) {
	u := Use{Fingerprint: fp, Op: "sign"}
	if !bytes.HasPrefix(data, []byte(sshsigMagic)) {
		return u, c.refuse(u, "the key is lent only to sign (SSHSIG), and this is not SSHSIG data")
	}
	var b sshsigBlob
	if err := ssh.Unmarshal(data[len(sshsigMagic):], &b); err != nil {
		return u, c.refuse(u, "malformed SSHSIG data")
	}
	if b.Namespace != "git" {
		return u, c.refuse(u, "the key is lent to sign git's commits and tags (SSHSIG namespace git), and this is namespace "+strconv.Quote(b.Namespace))
	}
	if b.HashAlg != "sha256" && b.HashAlg != "sha512" {
		return u, c.refuse(u, "SSHSIG hash algorithm "+b.HashAlg+" is not sha256 or sha512")
	}
	u.Op = "sign (SSHSIG, namespace " + b.Namespace + ")"
	return u, nil
}

// userauthRequest is the data an ssh client signs to log in with a key
// (RFC 4252 section 7); with the method publickey-hostbound-v00@openssh.com
// (OpenSSH since 8.9) the server's host key follows, in Rest.
type userauthRequest struct {
	Session   []byte
	Type      byte
	User      string
	Service   string
	Method    string
	HasSig    bool
	Algorithm string
	PubKey    []byte
	Rest      []byte `ssh:"rest"`
}

// The methods of an ssh login with a key.
const (
	methodPublickey = "publickey"
	methodHostbound = "publickey-hostbound-v00@openssh.com"
)

// parseUserauth is data as an ssh login with a key, or false.
func parseUserauth(data []byte) (userauthRequest, bool) {
	var req userauthRequest
	if err := ssh.Unmarshal(data, &req); err != nil || req.Type != 50 || !req.HasSig {
		return req, false
	}
	switch req.Method {
	case methodPublickey:
		return req, len(req.Rest) == 0
	case methodHostbound:
		var hk struct{ HostKey []byte }
		if ssh.Unmarshal(req.Rest, &hk) != nil {
			return req, false
		}
		req.Rest = hk.HostKey
		return req, true
	}
	return req, false
}

// checkLogin lets a destination-bound key sign only an ssh login, with
// this very key, for the session identifier of a bind on this connection
// to a host key of one of its destinations.
func (c *Conn) checkLogin(l *Lent, fp string, key ssh.PublicKey, data []byte) (Use, error) {
	u := Use{Fingerprint: fp, Op: "sign (ssh login)"}
	req, ok := parseUserauth(data)
	if !ok {
		return u, c.refuse(u, "the key is lent only to log in, and this is not an ssh login")
	}
	if !bytes.Equal(req.PubKey, key.Marshal()) {
		return u, c.refuse(u, "the login names another key")
	}
	if len(c.binds) == 0 {
		return u, c.refuse(u, "the ssh connection was not bound to a host key (session-bind@openssh.com: OpenSSH 8.9 or later)")
	}
	last := c.binds[len(c.binds)-1]
	if !bytes.Equal(last.sessionID, req.Session) {
		return u, c.refuse(u, "the login is not for the ssh connection the agent was bound to")
	}
	if req.Method == methodHostbound && !bytes.Equal(req.Rest, last.hostKey.Marshal()) {
		return u, c.refuse(u, "the login names another host key than the one the connection was bound to")
	}
	for _, d := range l.Dests {
		if d.hasKey(last.hostKey) {
			u.Dest = d.Name
			u.Op += " as " + req.User
			return u, nil
		}
	}
	u.Dest = "host key " + ssh.FingerprintSHA256(last.hostKey)
	return u, c.refuse(u, "the host key is none of the key's destinations")
}

// sessionBind is session-bind@openssh.com's contents (OpenSSH's
// PROTOCOL.agent).
type sessionBind struct {
	HostKey    []byte
	SessionID  []byte
	Signature  []byte
	Forwarding bool
}

// Extension takes session-bind@openssh.com, checked (the session
// identifier signed by the host key), and refuses any other.
func (c *Conn) Extension(extensionType string, contents []byte) ([]byte, error) {
	u := Use{Op: "extension " + extensionType}
	if extensionType != "session-bind@openssh.com" {
		c.refuse(u, "no extension but session-bind@openssh.com passes")
		return nil, agent.ErrExtensionUnsupported
	}
	var sb sessionBind
	if err := ssh.Unmarshal(contents, &sb); err != nil {
		return nil, c.refuse(u, "malformed session-bind")
	}
	hk, err := ssh.ParsePublicKey(sb.HostKey)
	if err != nil {
		return nil, c.refuse(u, "session-bind: host key: "+err.Error())
	}
	u.Dest = "host key " + ssh.FingerprintSHA256(hk)
	var sig ssh.Signature
	if err := ssh.Unmarshal(sb.Signature, &sig); err != nil {
		return nil, c.refuse(u, "session-bind: malformed signature")
	}
	if err := hk.Verify(sb.SessionID, &sig); err != nil {
		return nil, c.refuse(u, "session-bind: the host key's signature does not verify")
	}
	if len(c.binds) >= 16 {
		return nil, c.refuse(u, "session-bind: too many binds on one connection")
	}
	c.binds = append(c.binds, bind{hostKey: hk, sessionID: sb.SessionID, forwarding: sb.Forwarding})
	u.Allowed = true
	c.f.report(u)
	return nil, nil
}

// Add refuses: a session adds no key to the user's agent.
func (c *Conn) Add(key agent.AddedKey) error {
	return c.refuse(Use{Op: "add"}, "a session may not add keys")
}

// Remove refuses: a session removes no key.
func (c *Conn) Remove(key ssh.PublicKey) error {
	return c.refuse(Use{Fingerprint: ssh.FingerprintSHA256(key), Op: "remove"}, "a session may not remove keys")
}

// RemoveAll refuses.
func (c *Conn) RemoveAll() error {
	return c.refuse(Use{Op: "remove all"}, "a session may not remove keys")
}

// Lock refuses: a session does not lock the user's agent.
func (c *Conn) Lock(passphrase []byte) error {
	return c.refuse(Use{Op: "lock"}, "a session may not lock the agent")
}

// Unlock refuses.
func (c *Conn) Unlock(passphrase []byte) error {
	return c.refuse(Use{Op: "unlock"}, "a session may not unlock the agent")
}

// Signers refuses: it is no part of the protocol, and gives no private key.
func (c *Conn) Signers() ([]ssh.Signer, error) {
	return nil, ErrRefused
}

var _ agent.ExtendedAgent = (*Conn)(nil)
