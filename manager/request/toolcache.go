package request

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"

	"mosaic/units"
)

// ToolCacheDir is the directory of the tool caches (sandbox.ToolCaches)
// the sessions of workspace share when they hold the same powers (see
// powers): one per workspace and set of powers, by the hash of both.
func (p Paths) ToolCacheDir(workspace, powers string) string {
	h := sha256.Sum256([]byte(workspace + "\x00" + powers))
	return filepath.Join(p.StateRoot, "caches", hex.EncodeToString(h[:8]))
}

// powers says what a session may do beyond its sandbox's floor: its
// profile, network and hosts, credentials and injected keys, lent git
// and ssh keys, what it reads of the host (--ro) and writes there (direct
// mode, --rw, host-run files), the bus, extra syscalls. A tool cache holds code the next session runs
// (a module's extracted source, a build's objects, a test's cached
// result, a built wheel), so sessions share one only when they hold the
// same powers: one with no network and no keys cannot plant code that a
// later session of the same workspace, lent a push or a key, then runs.
// Sessions alike (the second `go test` of a repository) still share.
func powers(s units.Spec) string {
	sorted := func(v []string) []string {
		v = slices.Clone(v)
		slices.Sort(v)
		return v
	}
	var inject, lends, ssh []string
	for _, r := range s.Inject {
		inject = append(inject, r.String())
	}
	for _, g := range s.GitLends {
		lends = append(lends, fmt.Sprintf("%s/%s %v", g.Host, g.Repo, sorted(g.Ops)))
	}
	if s.SSHAgent != nil {
		for _, l := range s.SSHAgent.Lent {
			ssh = append(ssh, fmt.Sprintf("%x %v %v", l.Key.Marshal(), l.SignOnly, l.Dests))
		}
	}
	b, _ := json.Marshal(struct {
		Profile, Network                        string
		Allow, Credentials, Inject, Lends, SSH  []string
		RO, RW, Seccomp                         []string
		Direct, HostExec, MayLaunch, Ask, Scope bool
	}{
		s.Profile, s.Network,
		sorted(s.Allow), sorted(s.Credentials), sorted(inject), sorted(lends), sorted(ssh),
		sorted(s.ExtraRO), sorted(s.ExtraRW), sorted(s.SeccompAllow),
		s.Clone == nil, s.AllowWriteHostExec, s.MayLaunch, s.Ask > 0, s.Scope,
	})
	return string(b)
}
