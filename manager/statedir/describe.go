package statedir

import (
	"strings"
	"time"

	"mosaic/internal/journald"
	"mosaic/manager/records"
	"mosaic/units"
)

// Describe is the description of the session plan s starts as launched l
// (records.Description: every attribute of a session is there; it is made
// here, where the spec is known, so that records, which the stage binary
// links, links no units).
func Describe(s units.Spec, l units.Launch) records.Description {
	binds := s.Binds()
	if s.Landlock() {
		binds = nil // no bwrap: the record says the mode, status its rows
	}
	return records.Description{Command: s.Command, Workspace: s.Workspace, WorkspaceGivenAs: s.GivenAs, Binds: binds,
		Profile: s.Profile, Credentials: s.Credentials, MayLaunch: s.MayLaunch, Network: s.Network, AllowHosts: s.Allow, NetworkDevice: s.TUN,
		Output: outputOf(s, l), SeccompAllow: s.SeccompAllow, Sandbox: s.Sandbox, HostExecWritable: s.AllowWriteHostExec,
		WorkspaceCopied: s.Clone != nil, Injected: injected(s), Environment: s.Env, Published: published(s), SSHKeysLent: sshKeysLent(s), GitLent: gitLent(s), PathDropped: s.PathDropped, EnvironmentDropped: s.EnvDropped, OwnGitDir: s.OwnGitDir, ToolCache: s.ToolCache,
		Limits: &records.Limits{MemoryMax: s.Limits.MemoryMax, TasksMax: s.Limits.TasksMax, CPUQuota: s.Limits.CPUQuota,
			TmpSize: s.Limits.TmpSize, HomeSize: s.Limits.HomeSize}}
}

// published is how the description names s's published ports.
func published(s units.Spec) []string {
	var out []string
	for _, p := range s.Publish {
		out = append(out, p.String())
	}
	return out
}

// sshKeysLent is how the description names the ssh keys s is lent.
func sshKeysLent(s units.Spec) []string {
	var out []string
	if s.SSHAgent != nil {
		for _, l := range s.SSHAgent.Lent {
			out = append(out, l.Describe())
		}
	}
	return out
}

// gitLent describes the session's --lend-git repositories.
func gitLent(s units.Spec) []string {
	var out []string
	for _, g := range s.GitLends {
		out = append(out, g.URL()+" for "+strings.Join(g.Ops, ", "))
	}
	return out
}

// outputOf is where a session's output goes: the journal for a
// background service, the caller's terminal or pipes for mosaic run, a
// terminal of its own for start --pty.
func outputOf(s units.Spec, l units.Launch) string {
	if l.Attach != nil {
		return "pty"
	}
	if l.Stdio != nil || s.Scope {
		return "terminal"
	}
	return "journal"
}

// injected maps each credential the egress proxy injects to its hosts.
func injected(s units.Spec) map[string][]string {
	if len(s.Inject) == 0 {
		return nil
	}
	m := map[string][]string{}
	for _, r := range s.Inject {
		m[r.Var] = r.Hosts
	}
	return m
}

// RecordOf is the record of the session plan s is about to start as
// launched l.
func RecordOf(s units.Spec, l units.Launch) records.Record {
	return records.Record{Name: s.Name, Description: Describe(s, l), Started: time.Now(), Kind: s.Kind(), StartedBy: journald.Caller()}
}
