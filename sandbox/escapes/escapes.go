// Package escapes is mosaic's one escape table: what a session must not
// reach (your keys, other sessions, the user bus and systemd, host
// processes and IPC, the host's network) and the little it must, each
// checked from inside a real session against a stand-in that exists on the
// host, so that a denial means the sandbox hid it. `mosaic doctor --probe`
// runs the checks whose stand-ins it can make on any machine; the
// integration test runs every check, and again against a deliberately
// broken sandbox that must fail exactly one.
package escapes

import (
	"fmt"
	"net"
	"strings"
)

// Allowed and Denied are a check's answers.
const (
	Allowed = "allowed"
	Denied  = "denied"
	Skipped = "skipped" // its stand-in was not given
)

// Check is one row of the table.
type Check struct {
	Name string
	What string // what it tries, for people
	Want string // Allowed or Denied
	// Shell is run by sh inside the session with the stand-ins' variables
	// set (see StandIns); it succeeds when the session reached the thing.
	Shell string
	// Needs names the stand-in variable without which the check is skipped.
	Needs string
}

// Table is every check, in the order they run.
var Table = []Check{
	{"home-file", "a file in your real home", Denied, `cat "$home_file"`, "home_file"},
	{"ssh-key", "a key in your ~/.ssh", Denied, `cat "$ssh"`, "ssh"},
	{"aws-credentials", "your ~/.aws credentials", Denied, `cat "$aws"`, "aws"},
	{"claude-state", "an agent's sign-in in your ~/.claude", Denied, `cat "$claude"`, "claude"},
	{"other-workspace", "another session's workspace", Denied, `cat "$other_ws/secret"`, "other_ws"},
	{"other-state", "another session's home", Denied, `cat "$other_state/home/secret"`, "other_state"},
	{"user-bus", "the user bus socket", Denied, `test -e "$rt/bus"`, "rt"},
	{"systemd-private", "systemd's private socket", Denied, `test -e "$rt/systemd/private"`, "rt"},
	{"systemd-run", "starting a unit with systemd-run --user", Denied, `timeout 5 systemd-run --user --wait true`, ""},
	{"host-process", "a host process's command line in /proc", Denied,
		`m=$(mktemp) && printf '%s%s' "$mark1" "$mark2" > "$m" && grep -qsF -f "$m" /proc/[0-9]*/cmdline`, "mark1"},
	{"host-shm", "a file in the host's /dev/shm", Denied, `test -e "/dev/shm/$shm"`, "shm"},
	{"host-sysv", "a SysV shared memory segment of the host", Denied,
		`awk -v k="$sysv" '$1 == k { f = 1 } END { exit !f }' /proc/sysvipc/shm`, "sysv"},
	{"host-tmp", "a file in the host's /tmp", Denied, `test -e "$host_tmp"`, "host_tmp"},
	{"write-outside", "writing outside the workspace", Denied, `touch "$outside/escaped"`, "outside"},
	{"write-usr", "writing to /usr", Denied, `touch /usr/mosaic-escaped`, ""},
	// Reached, not merely named: listed, or a hierarchy's file found by path
	// (v2, or v1's unified and named ones) under a mount point that cannot be
	// listed. An empty mount point (a fresh sysfs's), or one that cannot be
	// searched (systemd's inaccessible directory), is not the tree.
	{"host-cgroup", "the cgroup tree", Denied, `ls -A /sys/fs/cgroup 2>/dev/null | grep -q . || test -e /sys/fs/cgroup/cgroup.controllers -o -e /sys/fs/cgroup/unified/cgroup.controllers -o -e /sys/fs/cgroup/systemd/tasks`, ""},
	{"env-leak", "a variable imported into the user manager (a desktop's tokens)", Denied, `env | grep -q "^$leak="`, "leak"},
	{"host-loopback", "a service on the host's 127.0.0.1 (and so its abstract sockets)", Denied,
		`timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port"`, "port"},
	{"workspace-write", "writing the workspace", Allowed, `touch "$ws/written"`, "ws"},
	{"tmp-write", "writing its own /tmp", Allowed, `touch /tmp/written`, ""},
}

// StandIns are the host's objects the checks look for, each made (and
// shown to exist) on the host first. An empty one skips its checks.
type StandIns struct {
	HomeFile       string // a file directly in the real home
	SSHKey         string // a file in ~/.ssh
	AWSCredentials string // a file in ~/.aws
	ClaudeState    string // a file in ~/.claude
	OtherWorkspace string // another session's workspace, holding "secret"
	OtherState     string // another session's state directory, holding home/secret
	RuntimeDir     string // $XDG_RUNTIME_DIR
	SHM            string // a file name in /dev/shm
	SysVKey        string // the key of a SysV segment, in decimal
	HostTmp        string // a file in the host's /tmp
	Outside        string // a writable directory outside the workspace
	Marker         string // carried by a host process's command line (at least 2 bytes)
	LeakVar        string // a variable set in the user manager's environment
	LoopbackPort   string // a port listening on the host's 127.0.0.1
	Workspace      string // the session's workspace
}

// vars are the script's variables, in the order of Args.
var vars = []string{"home_file", "ssh", "aws", "claude", "other_ws", "other_state", "rt", "shm", "sysv", "host_tmp",
	"outside", "mark1", "mark2", "leak", "port", "ws"}

// LoopbackStandIn listens on the host's 127.0.0.1 (a service there stands
// for the host's network namespace and its abstract sockets) and accepts
// and closes every connection until closed; it returns the port.
func LoopbackStandIn() (port string, l net.Listener, err error) {
	l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ = net.SplitHostPort(l.Addr().String())
	return port, l, nil
}

// Args are the script's arguments (after sh -c SCRIPT sh). The marker goes
// in two halves, joined inside, so that no command line in the session
// carries it whole.
func (s StandIns) Args() []string {
	var m1, m2 string
	if len(s.Marker) >= 2 {
		m1, m2 = s.Marker[:len(s.Marker)/2], s.Marker[len(s.Marker)/2:]
	}
	return []string{s.HomeFile, s.SSHKey, s.AWSCredentials, s.ClaudeState, s.OtherWorkspace, s.OtherState, s.RuntimeDir,
		s.SHM, s.SysVKey, s.HostTmp, s.Outside, m1, m2, s.LeakVar, s.LoopbackPort, s.Workspace}
}

// Script is the sh script that runs checks and prints one "NAME ANSWER"
// line for each.
func Script(checks []Check) string {
	var b strings.Builder
	for i, v := range vars {
		fmt.Fprintf(&b, "%s=${%d}\n", v, i+1)
	}
	b.WriteString(`c() { n=$1 need=$2; shift 2; if [ -n "$need" ] && [ -z "$(eval echo \"\$$need\")" ]; then echo "$n skipped"; elif (eval "$1") >/dev/null 2>&1; then echo "$n allowed"; else echo "$n denied"; fi; }` + "\n")
	for _, c := range checks {
		fmt.Fprintf(&b, "c %s '%s' %s\n", c.Name, c.Needs, shellQuote(c.Shell))
	}
	return b.String()
}

// Parse reads the script's output into check name → answer.
func Parse(out string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			got[k] = v
		}
	}
	return got
}

// Named returns the checks of the table with those names, in table order.
func Named(names ...string) []Check {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []Check
	for _, c := range Table {
		if want[c.Name] {
			out = append(out, c)
		}
	}
	return out
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
