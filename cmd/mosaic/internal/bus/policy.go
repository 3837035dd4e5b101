package bus

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"mosaic/internal/errcode"
	"mosaic/internal/xdg"
	"mosaic/manager/request"

	"github.com/coreos/go-systemd/v22/unit"

	"mosaic/credentials"
	"mosaic/sandbox"
)

// Policy is what the bus lets a session launch, from ~/.config/mosaic/bus.conf
// in systemd's INI syntax:
//
//	[Launch]
//	# A profile sessions may launch, and how many sessions of it may run at once.
//	Profile=claude-code 2
//	Profile=generic 4
//	# What a launched session of a profile runs: the profile's Binary
//	# (without arguments) unless the policy names a command for it. A
//	# session names no command of its own: it would run with the
//	# profile's credentials.
//	Command=generic make test
//	Command=claude-code claude -p "do what TASK.md says"
//	# Launched workspaces must lie under this directory (default: the
//	# launching session's own workspace).
//	WorkspaceRoot=/home/me/src
//
// Without the file, sessions may launch nothing. A caller outside any
// session is not bound by it.
type Policy struct {
	Source        string              // the file read, or "" when there is none
	Capacity      map[string]int      // profile -> sessions of it that may run at once
	Commands      map[string][]string // profile -> what a launched session of it runs
	WorkspaceRoot string              // resolved; "" means the launching session's workspace
}

// PolicyFile is where the bus reads its policy.
func PolicyFile(home string) string {
	return filepath.Join(xdg.ConfigHome(home, os.Getenv), "mosaic", "bus.conf")
}

// ReadPolicy reads the policy at path; a missing file is the empty policy.
// A file it cannot read is bad input (the bus refuses to start on it).
func ReadPolicy(path string) (Policy, error) {
	p := Policy{Capacity: map[string]int{}, Commands: map[string][]string{}}
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
		case "Command":
			words, err := splitWords(o.Value)
			if err != nil || len(words) < 2 {
				return bad("Command=%s: write Command=PROFILE COMMAND [ARG...], e.g. Command=generic make test (%v)", o.Value, err)
			}
			p.Commands[words[0]] = words[1:]
		case "WorkspaceRoot":
			if !filepath.IsAbs(o.Value) {
				return bad("WorkspaceRoot=%s is not an absolute path", o.Value)
			}
			p.WorkspaceRoot = request.Resolve(o.Value)
		default:
			return bad("unknown setting %s= (known: Profile, Command, WorkspaceRoot)", o.Name)
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
	_, ok := p.Capacity[profile]
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
	return p.full(profile, running[profile])
}

// full refuses a launch of profile when n sessions of it launched by
// sessions run (or are starting) already.
func (p Policy) full(profile string, n int) error {
	if max := p.Capacity[profile]; n >= max {
		return errcode.CapacityFull.New("%d of %d sessions of profile %s launched by sessions already run: wait for one to end, or raise Profile=%s in %s", n, max, profile, profile, p.sourceName())
	}
	return nil
}

// commandFor is what a session launched from a session runs: the policy's
// Command= for the profile, else the profile's binary alone. The launcher
// chooses neither: the command runs with the profile's credentials, which
// the launcher must not reach (a `sh -c` of its choosing would hand them
// over). It may repeat that very command, or name none.
func (p Policy) commandFor(profile credentials.Profile, asked []string) ([]string, error) {
	command := p.Commands[profile.Name]
	if command == nil && profile.Binary != "" {
		command = []string{profile.Binary}
	}
	if command == nil {
		return nil, errcode.CommandNotAllowed.New("profile %s has no Binary= and %s names no Command=%s ...: a session cannot choose what a launched session runs", profile.Name, p.sourceName(), profile.Name)
	}
	if len(asked) > 0 && !slices.Equal(asked, command) {
		return nil, errcode.CommandNotAllowed.New("a session cannot choose the command of a session it launches: profile %s runs %q (from %s); leave the command out", profile.Name, command, p.commandSource(profile))
	}
	return command, nil
}

func (p Policy) commandSource(profile credentials.Profile) string {
	if p.Commands[profile.Name] != nil {
		return "Command= in " + p.sourceName()
	}
	return "the profile's Binary="
}

// splitWords splits a Command= value at blanks; a word in single or double
// quotes may hold blanks (there are no escapes).
func splitWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("an unclosed %c", quote)
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}

func (p Policy) sourceName() string {
	if p.Source == "" {
		return "~/.config/mosaic/bus.conf"
	}
	return p.Source
}
