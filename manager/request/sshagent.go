package request

import (
	"net"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"mosaic/credentials"
	"mosaic/internal/errcode"
	"mosaic/sandbox"
	"mosaic/sandbox/agentfilter"
	"mosaic/units"
)

// sshAgentOf reads the request's --lend-ssh-key and --lend-ssh-sign: each
// key must be in the user's agent (upstream, SSH_AUTH_SOCK), each
// destination in the user's known_hosts (or a host key file). A session
// lent any gets the filter's socket as its SSH_AUTH_SOCK and, with a
// signing key, git's ssh commit signing in its ~/.gitconfig.
func sshAgentOf(spec *units.Spec, req Request, p Paths, upstream string) error {
	if len(req.LendSSHKey) == 0 && len(req.LendSSHSign) == 0 {
		return nil
	}
	what := "--lend-ssh-key and --lend-ssh-sign"
	if req.profileSSH != "" {
		what += " (and profile " + req.profileSSH + "'s LendSSHKey=, LendSSHSign=)"
	}
	switch {
	case req.NoAgent != "":
		return errcode.BadSSHLend.New("%s: %s", what, req.NoAgent)
	case spec.Sandbox == sandbox.ModeLandlock || spec.BwrapBin == "":
		return errcode.BadSSHLend.New("%s are not available with --sandbox landlock yet", what)
	case req.Scope:
		return errcode.BadSSHLend.New("%s are not available with --scope yet", what)
	}
	if _, err := agentfilter.Upstream(upstream); err != nil {
		return errcode.NoSSHAgent.New("cannot lend ssh keys: %w (start ssh-agent and ssh-add the key)", err)
	}
	keys, err := listAgent(upstream)
	if err != nil {
		return errcode.NoSSHAgent.New("cannot lend ssh keys: the ssh agent on SSH_AUTH_SOCK: %w", err)
	}
	knownHosts := []string{filepath.Join(p.Home, ".ssh", "known_hosts"), "/etc/ssh/ssh_known_hosts"}
	var lent []agentfilter.Lent
	for _, v := range req.LendSSHKey {
		key, dests, _ := strings.Cut(v, "=")
		if dests == "" {
			return errcode.BadSSHLend.New("--lend-ssh-key %s: name where it may log in, KEY=HOST[,HOST...] (a key only to sign is --lend-ssh-sign)", v)
		}
		k, err := agentfilter.FindKey(key, keys)
		if err != nil {
			return errcode.BadSSHLend.New("--lend-ssh-key: %w", err)
		}
		l := agentfilter.Lent{Key: k}
		for _, d := range strings.Split(dests, ",") {
			dest, err := agentfilter.ParseDest(d, knownHosts)
			if err != nil {
				return errcode.BadSSHLend.New("--lend-ssh-key: %w", err)
			}
			l.Dests = append(l.Dests, dest)
		}
		lent = append(lent, l)
	}
	var signing ssh.PublicKey
	for _, v := range req.LendSSHSign {
		k, err := agentfilter.FindKey(v, keys)
		if err != nil {
			return errcode.BadSSHLend.New("--lend-ssh-sign: %w", err)
		}
		if signing != nil {
			return errcode.BadSSHLend.New("--lend-ssh-sign: one signing key per session (git signs with one)")
		}
		signing = k
		lent = append(lent, agentfilter.Lent{Key: k, SignOnly: true})
	}
	spec.SSHAgent = &units.SSHAgent{Upstream: upstream, Lent: lent}
	spec.Env = append(spec.Env, "SSH_AUTH_SOCK="+agentfilter.SocketInside)
	spec.Pass = append(spec.Pass, "SSH_AUTH_SOCK")
	if signing != nil {
		spec.GitConfig = signingConfig(spec.GitConfig, signing)
	}
	return nil
}

// sshLendsAsked is the request with its profile's LendSSHKey= and
// LendSSHSign= added: a key a --lend-ssh-key names is lent as the flag
// says, and a --lend-ssh-sign replaces the profile's signing key (one per
// session). Where the caller's agent is not here (req.NoAgent), a
// profile's lend is kept as a flag would be, for sshAgentOf to refuse.
func sshLendsAsked(req Request, profile credentials.Profile) Request {
	if len(profile.LendSSHKey) == 0 && profile.LendSSHSign == "" {
		return req
	}
	req.profileSSH = profile.Name
	keys := append([]string{}, req.LendSSHKey...)
	for _, v := range profile.LendSSHKey {
		key, _, _ := strings.Cut(v, "=")
		if !slices.ContainsFunc(req.LendSSHKey, func(f string) bool { k, _, _ := strings.Cut(f, "="); return k == key }) {
			keys = append(keys, v)
		}
	}
	req.LendSSHKey = keys
	if len(req.LendSSHSign) == 0 && profile.LendSSHSign != "" {
		req.LendSSHSign = []string{profile.LendSSHSign}
	}
	return req
}

// listAgent lists the keys of the agent on sock.
func listAgent(sock string) ([]*agent.Key, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return agent.NewClient(c).List()
}

// signingConfig is the session's ~/.gitconfig with git's ssh commit
// signing by key (its public half: the agent holds the private one).
func signingConfig(gitConfig string, key ssh.PublicKey) string {
	if gitConfig == "" {
		gitConfig = GitConfigHeader + "# config that sessions get, and the ssh signing key lent to this session.\n"
	}
	pub := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
	return gitConfig + "[gpg]\n\tformat = ssh\n[user]\n\tsigningkey = " + quoteGitValue("key::"+pub) +
		"\n[commit]\n\tgpgsign = true\n[tag]\n\tgpgsign = true\n"
}
