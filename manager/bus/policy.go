package bus

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"mosaic/manager/request"
	"mosaic/units/errcode"

	"github.com/coreos/go-systemd/v22/unit"

	"mosaic/sandbox"
)

// Policy is what the bus lets a session launch, from ~/.config/mosaic/bus.conf
// in systemd's INI syntax:
//
//	[Launch]
//	# A profile sessions may launch, and how many sessions of it may run at once.
//	Profile=claude-code 2
//	Profile=generic 4
//	# Launched workspaces must lie under this directory (default: the
//	# launching session's own workspace).
//	WorkspaceRoot=/home/me/src
//
// Without the file, sessions may launch nothing. A caller outside any
// session is not bound by it.
type Policy struct {
	Source        string         // the file read, or "" when there is none
	Capacity      map[string]int // profile -> sessions of it that may run at once
	WorkspaceRoot string         // resolved; "" means the launching session's workspace
}

// PolicyFile is where the bus reads its policy.
func PolicyFile(home string) string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "mosaic", "bus.conf")
}

// ReadPolicy reads the policy at path; a missing file is the empty policy.
// A file it cannot read is bad input (the bus refuses to start on it).
func ReadPolicy(path string) (Policy, error) {
	p := Policy{Capacity: map[string]int{}}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return p, nil
	}
	bad := func(format string, args ...any) (Policy, error) {
		return Policy{}, errcode.BadPolicy.New("bus policy %s: %s", path, fmt.Sprintf(format, args...))
	}
	if err != nil {
		return bad("%v", err)
	}
	defer f.Close()
	p.Source = path
	opts, err := unit.DeserializeOptions(f)
	if err != nil {
		return bad("%v (it is read as a systemd unit file)", err)
	}
	for _, o := range opts {
		if o.Section != "Launch" {
			return bad("unknown section [%s]: use [Launch]", o.Section)
		}
		switch o.Name {
		case "Profile":
			fields := strings.Fields(o.Value)
			if len(fields) != 2 {
				return bad("Profile=%s: write Profile=NAME MAX, e.g. Profile=claude-code 2", o.Value)
			}
			n, err := strconv.Atoi(fields[1])
			if err != nil || n < 1 {
				return bad("Profile=%s: MAX must be a whole number of sessions, at least 1", o.Value)
			}
			p.Capacity[fields[0]] = n
		case "WorkspaceRoot":
			if !filepath.IsAbs(o.Value) {
				return bad("WorkspaceRoot=%s is not an absolute path", o.Value)
			}
			p.WorkspaceRoot = request.Resolve(o.Value)
		default:
			return bad("unknown setting %s= (known: Profile, WorkspaceRoot)", o.Name)
		}
	}
	return p, nil
}

// Profiles are the profiles the policy allows, sorted.
func (p Policy) Profiles() []string {
	var names []string
	for n := range p.Capacity {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// checkLaunch applies the policy to a launch asked for by a session whose
// workspace is fromWorkspace; running counts, per profile, the running
// sessions that sessions launched.
func (p Policy) checkLaunch(req request.Request, profile, fromWorkspace string, running map[string]int) error {
	// What the request asks for first, then whether there is room.
	max, ok := p.Capacity[profile]
	if !ok {
		allowed := strings.Join(p.Profiles(), ", ")
		if allowed == "" {
			allowed = "none (no Profile= in " + p.sourceName() + ")"
		}
		return errcode.ProfileNotAllowed.New("the bus policy does not let sessions launch profile %s: allowed are %s", profile, allowed)
	}
	if len(req.ExtraRO) > 0 || len(req.ExtraRW) > 0 || len(req.EnvFiles) > 0 || len(req.Credentials) > 0 || req.Network != "" || len(req.AllowHosts) > 0 {
		return errcode.BindNotAllowed.New("a session cannot give the session it launches extra paths, credentials or network: only the profile's")
	}
	if req.MayLaunch {
		return errcode.NotPermitted.New("a session cannot launch a session that may launch others")
	}
	root := p.WorkspaceRoot
	if root == "" {
		root = fromWorkspace
	}
	ws := req.Workspace
	if ws == "" || !filepath.IsAbs(ws) {
		return errcode.WorkspaceNotAllowed.New("a launch from a session must name its workspace as an absolute path under %s", root)
	}
	if root == "" || !sandbox.Within(request.Resolve(ws), root) {
		return errcode.WorkspaceNotAllowed.New("workspace %s is not under %s, where the bus policy lets sessions launch", ws, root)
	}
	if running[profile] >= max {
		return errcode.CapacityFull.New("%d of %d sessions of profile %s launched by sessions already run: wait for one to end, or raise Profile=%s in %s", running[profile], max, profile, profile, p.sourceName())
	}
	return nil
}

func (p Policy) sourceName() string {
	if p.Source == "" {
		return "~/.config/mosaic/bus.conf"
	}
	return p.Source
}
