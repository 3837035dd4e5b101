package agentfilter

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// ErrNoAgent is a lend's error when the user's agent is not there
// (SSH_AUTH_SOCK unset, or nothing answers on it).
var ErrNoAgent = errors.New("no ssh agent")

// Upstream dials the user's agent named by SSH_AUTH_SOCK.
func Upstream(sock string) (func() (net.Conn, error), error) {
	if sock == "" {
		return nil, fmt.Errorf("%w: SSH_AUTH_SOCK is not set", ErrNoAgent)
	}
	if !filepath.IsAbs(sock) {
		// The filter's unit reaches it by a bind at its own path.
		return nil, fmt.Errorf("%w: SSH_AUTH_SOCK %q is not an absolute path", ErrNoAgent, sock)
	}
	dial := func() (net.Conn, error) { return net.Dial("unix", sock) }
	c, err := dial()
	if err != nil {
		return nil, fmt.Errorf("%w: SSH_AUTH_SOCK: %w", ErrNoAgent, err)
	}
	c.Close()
	return dial, nil
}

// FindKey is the agent's key named by spec: its SHA256 fingerprint
// (SHA256:...) or a public key file (one key, authorized_keys format).
// A key the agent does not hold is an error: nothing could sign with it.
func FindKey(spec string, keys []*agent.Key) (*agent.Key, error) {
	var want string
	if strings.HasPrefix(spec, "SHA256:") {
		want = spec
	} else {
		b, err := os.ReadFile(spec)
		if err != nil {
			return nil, fmt.Errorf("ssh key %q: neither a SHA256: fingerprint nor a public key file: %w", spec, err)
		}
		pk, _, _, _, err := ssh.ParseAuthorizedKey(b)
		if err != nil {
			return nil, fmt.Errorf("ssh key %q: not a public key file: %w", spec, err)
		}
		want = ssh.FingerprintSHA256(pk)
	}
	for _, k := range keys {
		if ssh.FingerprintSHA256(k) == want {
			return k, nil
		}
	}
	return nil, fmt.Errorf("ssh key %s is not in the ssh agent (ssh-add -l lists its keys)", want)
}

// ParseDest is the destination name: a host ("host", "host:port",
// "[host]:port") whose keys are its lines in the known_hosts files, or a
// host public key file (a name with a "/"). A host none of the files
// knows is an error: no bind could match it.
func ParseDest(name string, knownHosts []string) (Dest, error) {
	if strings.Contains(name, "/") {
		b, err := os.ReadFile(name)
		if err != nil {
			return Dest{}, fmt.Errorf("ssh destination %q: %w", name, err)
		}
		hk, _, _, _, err := ssh.ParseAuthorizedKey(b)
		if err != nil {
			return Dest{}, fmt.Errorf("ssh destination %q: not a host public key file: %w", name, err)
		}
		return Dest{Name: name, Keys: []ssh.PublicKey{hk}}, nil
	}
	host, port := name, "22"
	if h, p, err := net.SplitHostPort(name); err == nil {
		host, port = h, p
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil || host == "" || strings.ContainsAny(host, " \t,*?!") {
		return Dest{}, fmt.Errorf("ssh destination %q: not a host or host:port", name)
	}
	var files []string
	for _, f := range knownHosts {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return Dest{}, fmt.Errorf("ssh destination %q: no known_hosts file to find its host keys in", name)
	}
	cb, err := knownhosts.New(files...)
	if err != nil {
		return Dest{}, fmt.Errorf("ssh destination %q: %w", name, err)
	}
	// A key of no host's gets the host's known keys back, in the error.
	var ke *knownhosts.KeyError
	err = cb(net.JoinHostPort(host, port), &net.TCPAddr{IP: net.IPv4zero, Port: 22}, probeKey{})
	if !errors.As(err, &ke) || len(ke.Want) == 0 {
		return Dest{}, fmt.Errorf("ssh destination %q: not in known_hosts (ssh to it once, or give its host key file)", name)
	}
	d := Dest{Name: name}
	for _, k := range ke.Want {
		d.Keys = append(d.Keys, k.Key)
	}
	return d, nil
}

// probeKey is a public key no host has.
type probeKey struct{}

// Type is the probe key's type.
func (probeKey) Type() string { return "mosaic-probe" }

// Marshal is the probe key's wire form.
func (probeKey) Marshal() []byte { return []byte("mosaic-probe") }

// Verify verifies nothing.
func (probeKey) Verify([]byte, *ssh.Signature) error { return errors.New("probe key") }
