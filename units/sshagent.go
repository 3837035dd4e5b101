package units

import (
	"path/filepath"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"mosaic/sandbox/agentfilter"
)

// SSHAgent is what a session is lent of the user's ssh agent
// (--lend-ssh-key, --lend-ssh-sign): the agent's socket and the keys.
type SSHAgent struct {
	Upstream string // the user's SSH_AUTH_SOCK
	Lent     []agentfilter.Lent
}

// SSHAgentUnit is the unit of session s's ssh agent filter.
func (s Spec) SSHAgentUnit() string { return SSHAgentUnitName(s.Name) }

// SSHAgentUnitName is the ssh agent filter unit of session name.
func SSHAgentUnitName(name string) string { return UnitPrefix + name + "-ssh-agent" + UnitSuffix }

// SSHAgentDir is the directory of session name's agent filter socket, in
// the user's runtime directory, bound read-only at agentfilter.DirInside.
func SSHAgentDir(runtimeDir, name string) string {
	return filepath.Join(runtimeDir, "mosaic", "ssh-agent", name)
}

// The filter's own bounds.
const (
	SSHAgentMemoryMax uint64 = 32 << 20
	SSHAgentTasksMax  uint64 = 32
)

// sshAgentProperties are the properties of session s's agent filter: a
// broker (brokerProperties) that writes only its socket's directory and
// reaches the user's agent by its socket, bound at its own path.
func sshAgentProperties(s Spec) []sd.Property {
	dir := SSHAgentDir(s.RuntimeDir, s.Name)
	argv := agentfilter.Argv(s.MosaicBin, s.Name, filepath.Join(dir, agentfilter.SocketName), s.SSHAgent.Upstream, s.SSHAgent.Lent)
	return brokerProperties(s, broker{Description: "mosaic ssh agent filter of session " + s.Name, Unit: s.SSHAgentUnit(),
		Argv: argv, Binds: bindsOf([]string{dir, s.SSHAgent.Upstream}), MemoryMax: SSHAgentMemoryMax, TasksMax: SSHAgentTasksMax, Procs: 2})
}

// sshAgentDir is the filter's socket directory, or "" for a session lent
// no agent.
func (s Spec) sshAgentDir() string {
	if s.SSHAgent == nil {
		return ""
	}
	return SSHAgentDir(s.RuntimeDir, s.Name)
}
