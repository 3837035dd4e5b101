package request

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode"

	"mosaic/internal/errcode"
	"mosaic/internal/regfile"
	"mosaic/sandbox"
	"mosaic/sandbox/egress"
	"mosaic/sandbox/publish"
	"mosaic/units"
)

// MachinePolicyFile is the machine's policy: a file root keeps, in
// mosaic.conf's format (KEY = VALUE lines, `#` comments), whose rules are a
// ceiling on what any session of any user of this machine may be given
// (policyKeys). A request beyond one is refused before anything starts
// (policy-refused, naming the rule's file and line); the user's flags,
// profiles and mosaic.conf cannot lift it, and neither can a bus launch.
// It guards against mistakes and against an agent asking the bus for
// more, not against the user, who can always run a mosaic of their own
// build: so it must be root's (not writable by anyone else) to count as
// the machine's at all, and a file of the wrong owner is refused rather
// than ignored.
const MachinePolicyFile = "/etc/mosaic/policy.conf"

// PolicyEnv names a further policy file whose rules apply on top of the
// machine's: every rule of every file must be met, so a file named here
// can only tighten (the tests' policies, a user's own ceiling), never
// lift a rule of MachinePolicyFile.
const PolicyEnv = "MOSAIC_POLICY"

// policyKeys are a policy's rules, each with what its value is: a list
// (network modes, hosts, variable names, directories: an empty one allows
// none), yes/no, or a limit a session's must be at most.
var policyKeys = map[string]string{
	"network":         "the network modes a session may have, of none, allow and host (none is always allowed)",
	"allow-host":      "the hosts, @groups, addresses and host loopback ports a session's allowlist may hold (empty: none)",
	"direct":          "yes or no: whether a session may write the workspace itself (direct mode) rather than a copy (clone mode)",
	"write-host-exec": "yes or no: whether a session may be given --allow-write-host-exec",
	"may-launch":      "yes or no: whether a session may launch others through the bus (--may-launch)",
	"publish":         "yes or no: whether a session may publish ports (--publish)",
	"credentials":     "the credential variables a session may be given (empty: none)",
	"bind-ro":         "the directories a --ro bind (or a profile's ReadOnly=) must lie in (empty: none)",
	"bind-rw":         "the directories a --rw bind must lie in (empty: none)",
	"memory-max":      "the most memory a session may have (its default is lowered to it)",
	"tasks-max":       "the most tasks a session may have (its default is lowered to it)",
	"cpu-quota":       "the most CPU a session may have (its default is lowered to it)",
	"runtime-max":     "the longest a session may run (its default, none, becomes it)",
}

// PolicyRule is one line of a policy file.
type PolicyRule struct {
	Key   string `json:"rule"`
	Value string `json:"value"`
	File  string `json:"file"`
	Line  int    `json:"line"`
	words []string
	limit units.Limits
}

// Where is the rule's file and line, as an editor takes them.
func (r PolicyRule) Where() string { return fmt.Sprintf("%s:%d", r.File, r.Line) }

// Policy is every rule that applies to this user's sessions, of every
// file read (Files, in order).
type Policy struct {
	Files []string     `json:"files"`
	Rules []PolicyRule `json:"rules"`
}

// ReadPolicy reads the machine's policy and PolicyEnv's file. A machine
// policy that does not exist says nothing; one that is not root's, or a
// file that does not parse, is bad input (bad-policy) naming its file and
// line: nothing starts under a policy mosaic cannot read.
func ReadPolicy() (Policy, error) {
	var pol Policy
	if err := pol.read(MachinePolicyFile, true); err != nil {
		return Policy{}, err
	}
	if extra := os.Getenv(PolicyEnv); extra != "" {
		if !filepath.IsAbs(extra) {
			return Policy{}, errcode.BadPolicy.New("%s=%s: name the policy file by its absolute path", PolicyEnv, extra)
		}
		if err := pol.read(extra, false); err != nil {
			return Policy{}, err
		}
	}
	return pol, nil
}

// read adds path's rules; machine says the file is the machine's, which
// may be absent but must be root's.
func (pol *Policy) read(path string, machine bool) error {
	f, fi, err := regfile.Open(path, false)
	if machine && os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return errcode.BadPolicy.New("policy %w", err)
	}
	defer f.Close()
	// The owner of the file read, not of a path looked at again.
	if st, ok := fi.Sys().(*syscall.Stat_t); machine && (!ok || !rootID(st.Uid) || fi.Mode().Perm()&0o022 != 0) {
		return errcode.BadPolicy.New("policy %s must be root's and writable by root alone to be the machine's: chown root:root %s && chmod 644 %s", path, path, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, 1<<20+1))
	if err == nil && len(data) > 1<<20 {
		err = fmt.Errorf("it is more than 1 MiB")
	}
	if err != nil {
		return errcode.BadPolicy.New("policy %s: %w", path, err)
	}
	rules, err := ParsePolicy(path, data)
	if err != nil {
		return err
	}
	pol.Files = append(pol.Files, path)
	pol.Rules = append(pol.Rules, rules...)
	return nil
}

// rootID reports whether uid is root as this process sees it: 0, or the
// kernel's overflow uid where this process runs in a user namespace that
// does not map root (the bus's unit has PrivateUsers=yes, and a user
// manager can map only the user's own uid, so root's files show as
// nobody's there). Never the user's own uid.
func rootID(uid uint32) bool {
	if uid == 0 {
		return true
	}
	if uid == uint32(os.Getuid()) {
		return false
	}
	b, err := os.ReadFile("/proc/sys/kernel/overflowuid")
	if err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(uid) {
		return false
	}
	m, err := os.ReadFile("/proc/self/uid_map")
	return err == nil && !strings.HasPrefix(strings.TrimSpace(string(m)), "0 ")
}

// ParsePolicy reads a policy file's text; path is only for the messages.
func ParsePolicy(path string, data []byte) ([]PolicyRule, error) {
	return parseRules(path, data, policyKeys, errcode.BadPolicy)
}

// parseRules reads KEY = VALUE lines of the keys given, each checked for
// its key (PolicyRule.parse); what is wrong is bad, naming the line.
func parseRules(path string, data []byte, keys map[string]string, bad errcode.Code) ([]PolicyRule, error) {
	var rules []PolicyRule
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.ContainsFunc(line, func(c rune) bool { return unicode.IsControl(c) && c != '\t' }) {
			return nil, bad.New("%s:%d: the line holds a control character: write it in plain text", path, n)
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || keys[k] == "" {
			return nil, bad.New("%s:%d: %q is not KEY = VALUE with a known key (%s)", path, n, strings.TrimSpace(line), strings.Join(sortedKeys(keys), ", "))
		}
		if first, twice := seen[k]; twice {
			return nil, bad.New("%s:%d: %s is given twice (first at line %d): keep one", path, n, k, first)
		}
		seen[k] = n
		r := PolicyRule{Key: k, Value: v, File: path, Line: n, words: strings.Fields(v)}
		if err := r.parse(); err != nil {
			return nil, bad.New("%s:%d: %s = %s: %w", path, n, k, v, err)
		}
		rules = append(rules, r)
	}
	if err := sc.Err(); err != nil {
		return nil, bad.New("%s: %w", path, err)
	}
	return rules, nil
}

// sortedKeys are the keys a file takes, for a message.
func sortedKeys(keys map[string]string) []string {
	var out []string
	for k := range keys {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// parse checks the rule's value for its key.
func (r *PolicyRule) parse() error {
	switch r.Key {
	case "network":
		for _, w := range r.words {
			if !sandbox.ValidNetwork(w) {
				return fmt.Errorf("%q is not a network mode: list some of none, allow, host", w)
			}
		}
	case "allow-host":
		if _, err := egress.ParseAllow(r.words); err != nil {
			return err
		}
	case "direct", "write-host-exec", "may-launch", "publish":
		if r.Value != "yes" && r.Value != "no" {
			return fmt.Errorf("use yes or no")
		}
	case "bind-ro", "bind-rw":
		for _, w := range r.words {
			if !filepath.IsAbs(w) {
				return fmt.Errorf("%q is not an absolute path", w)
			}
		}
	case "ask-allow-host":
		for _, w := range r.words {
			h, err := hostOfURL(w)
			if err == nil {
				_, err = egress.ParseAllow([]string{h})
			}
			if err != nil {
				return err
			}
		}
	case "ask-publish":
		for _, w := range r.words {
			if _, err := publish.Parse(w); err != nil {
				return err
			}
		}
	case "ask-memory-max", "ask-tasks-max", "ask-cpu-quota", "ask-runtime-max":
		r.Key = strings.TrimPrefix(r.Key, "ask-")
		defer func() { r.Key = "ask-" + r.Key }()
		return r.parse()
	case "memory-max", "tasks-max", "cpu-quota", "runtime-max":
		if r.Value == "infinity" {
			return fmt.Errorf("a ceiling of infinity limits nothing: give a value or drop the line")
		}
		var ls units.LimitStrings
		*map[string]*string{"memory-max": &ls.MemoryMax, "tasks-max": &ls.TasksMax, "cpu-quota": &ls.CPUQuota, "runtime-max": &ls.RuntimeMax}[r.Key] = r.Value
		l, err := ls.Parse()
		if err != nil {
			return err
		}
		r.limit = l
	}
	return nil
}

// LowerDefaults lowers each default limit to the policy's ceiling for it:
// a session that asks for no limit gets the most the policy allows (a
// runtime-max where the default is none), not a refusal.
func (pol Policy) LowerDefaults(d units.Limits) units.Limits {
	for _, r := range pol.Rules {
		l := r.limit
		if l.MemoryMax != 0 && (d.MemoryMax == 0 || d.MemoryMax > l.MemoryMax) {
			d.MemoryMax = l.MemoryMax
		}
		if l.TasksMax != 0 && (d.TasksMax == 0 || d.TasksMax > l.TasksMax) {
			d.TasksMax = l.TasksMax
		}
		if l.CPUQuota != 0 && (d.CPUQuota == 0 || d.CPUQuota > l.CPUQuota) {
			d.CPUQuota = l.CPUQuota
		}
		if l.RuntimeMax != 0 && (d.RuntimeMax == 0 || d.RuntimeMax > l.RuntimeMax) {
			d.RuntimeMax = l.RuntimeMax
		}
	}
	return d
}

// Asked is what a session would be given, as a policy judges it: the
// spec's settings and the binds the request named (not the ones mosaic
// adds itself: the command's own files, a CA).
type Asked struct {
	Spec   units.Spec
	RO, RW []string // resolved
	// Network says where the network came from, for the message: a flag or
	// a profile's Network=.
	NetworkFrom string
}

// Check is nil if every rule lets the session have what it asks, else
// the refusal (policy-refused) naming the first rule it is beyond.
func (pol Policy) Check(a Asked) error {
	for _, r := range pol.Rules {
		if why := r.beyond(a); why != "" {
			return errcode.PolicyRefused.New("the policy %s (%s = %s) refuses %s: nothing was started (a policy is a ceiling your flags, profiles and mosaic.conf cannot lift; `mosaic policy` lists its rules)", r.Where(), r.Key, r.Value, why)
		}
	}
	return nil
}

// AllowsNetwork reports whether every network rule of the policy allows
// network mode.
func (pol Policy) AllowsNetwork(mode string) bool {
	for _, r := range pol.Rules {
		if r.Key == "network" && mode != sandbox.NetworkNone && !slices.Contains(r.words, mode) {
			return false
		}
	}
	return true
}

// beyond says what of a the rule does not allow, or "".
func (r PolicyRule) beyond(a Asked) string {
	s := a.Spec
	switch r.Key {
	case "network":
		if s.Network != sandbox.NetworkNone && !slices.Contains(r.words, s.Network) {
			return fmt.Sprintf("network %s (%s)", s.Network, a.NetworkFrom)
		}
	case "allow-host":
		return r.beyondHosts(s.Allow)
	case "direct":
		if r.Value == "no" && s.Clone == nil {
			return "direct mode (the session would write the workspace itself): use --clone"
		}
	case "write-host-exec":
		if r.Value == "no" && s.AllowWriteHostExec {
			return "--allow-write-host-exec"
		}
	case "may-launch":
		if r.Value == "no" && s.MayLaunch {
			return "--may-launch"
		}
	case "publish":
		if r.Value == "no" && len(s.Publish) > 0 {
			return "--publish"
		}
	case "credentials":
		for _, c := range s.Credentials {
			if !slices.Contains(r.words, c) {
				return "the credential " + c
			}
		}
	case "bind-ro":
		return r.beyondDirs("--ro", a.RO)
	case "bind-rw":
		return r.beyondDirs("--rw", a.RW)
	default:
		return beyondLimit(r.limit, s.Limits)
	}
	return ""
}

// beyondHosts is the first entry of allow the rule's hosts do not cover.
func (r PolicyRule) beyondHosts(allow []string) string {
	limit, _ := egress.ParseAllow(r.words) // checked when read
	for _, e := range allow {
		a, err := egress.ParseAllow([]string{e})
		if err != nil || !covers(limit, a) {
			return "the host " + e
		}
	}
	return ""
}

// covers reports whether everything a allows, limit allows.
func covers(limit, a egress.Allow) bool {
	for h := range a.Hosts {
		if !limit.Hosts[h] {
			return false
		}
	}
	for h := range a.Plain {
		if !limit.Plain[h] {
			return false
		}
	}
	for p := range a.Local {
		if !limit.Local[p] {
			return false
		}
	}
	for _, p := range a.Addrs {
		if !slices.ContainsFunc(limit.Addrs, func(q netip.Prefix) bool { return q.Bits() <= p.Bits() && q.Contains(p.Addr()) }) {
			return false
		}
	}
	return true
}

// beyondDirs is the first of paths in none of the rule's directories.
func (r PolicyRule) beyondDirs(flag string, paths []string) string {
	for _, p := range paths {
		if !slices.ContainsFunc(r.words, func(d string) bool { return sandbox.Within(p, Resolve(d)) }) {
			return flag + " " + p
		}
	}
	return ""
}

// beyondLimit says which of the session's limits is above the ceiling's
// one limit (infinity is above every ceiling), or "".
func beyondLimit(ceil, l units.Limits) string {
	over := func(v, c uint64) bool { return c != 0 && (v == 0 || v == units.Infinity || v > c) }
	switch {
	case over(l.MemoryMax, ceil.MemoryMax):
		return "memory-max " + sizeOf(l.MemoryMax)
	case over(l.TasksMax, ceil.TasksMax):
		return "tasks-max " + countOf(l.TasksMax)
	case over(l.CPUQuota, ceil.CPUQuota):
		return "cpu-quota " + countOf(l.CPUQuota) + "%"
	case ceil.RuntimeMax != 0 && (l.RuntimeMax == 0 || l.RuntimeMax > ceil.RuntimeMax):
		if l.RuntimeMax == 0 {
			return "a session with no runtime-max"
		}
		return "runtime-max " + l.RuntimeMax.Round(time.Second).String()
	}
	return ""
}

// sizeOf and countOf write a limit for a message.
func sizeOf(v uint64) string {
	if v == units.Infinity {
		return "infinity"
	}
	return fmt.Sprintf("%dM", v>>20)
}

func countOf(v uint64) string {
	if v == units.Infinity {
		return "infinity"
	}
	return fmt.Sprint(v)
}

// CheckGrant is nil if the policy's allow-host rules let a running session
// be given entries (mosaic allow), else the refusal: a grant is a request
// as a flag at start is.
func (pol Policy) CheckGrant(entries []string) error {
	for _, r := range pol.Rules {
		if r.Key != "allow-host" {
			continue
		}
		if why := r.beyondHosts(entries); why != "" {
			return errcode.PolicyRefused.New("the policy %s (%s = %s) refuses %s: nothing was granted (`mosaic policy` lists its rules)", r.Where(), r.Key, r.Value, why)
		}
	}
	return nil
}

// Explain is what a rule's key means, for `mosaic policy`.
func (r PolicyRule) Explain() string { return policyKeys[r.Key] }
