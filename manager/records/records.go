// Package records keeps what mosaic knows of a session beside its state
// directory ($XDG_STATE_HOME/mosaic/sessions/NAME/): session.json (what
// systemd does not know: the binds' reasons, the workspace as given, the
// profile), written at each start, and end.json (how it ended), written by
// the unit's own ExecStopPost: the session-ended stage, whose parser
// (EndedMain) is here (its argv writer is units.EndedArgv; statedir.RecordOf
// makes the record of a spec). While systemd has a
// session's unit, systemd is the record of how it runs and ended; systemd
// collects a unit that ended cleanly at once, and then these files answer
// `mosaic status` and `list --all` until `mosaic rm` or `mosaic gc`.
package records

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/internal/regfile"
	"mosaic/sandbox"
)

// Description is what one session is, as its start planned it: what it
// runs, where, with which binds, network, credentials (by name), and in
// which mode. It is made once, by Describe from the session's spec, and
// embedded as it is in the record (session.json), in what status and list
// report (session.Session) and in the bus's launch log (bus.LogEvent): a
// new attribute of a session is a field here. Its JSON names are the ones
// users' scripts read: never rename one.
type Description struct {
	Command          []string       `json:"command,omitempty"`
	Workspace        string         `json:"workspace,omitempty"`          // its real path
	WorkspaceGivenAs string         `json:"workspace_given_as,omitempty"` // as the user gave it, when that was a symlink
	Binds            []sandbox.Bind `json:"binds,omitempty"`              // bwrap's mounts, each with its reason
	Profile          string         `json:"profile,omitempty"`
	Credentials      []string       `json:"credentials,omitempty"` // names; values never leave the env file
	MayLaunch        bool           `json:"may_launch,omitempty"`  // started with --may-launch: the bus lets it launch sessions
	Network          string         `json:"network,omitempty"`     // none, allow or host (not confined)
	AllowHosts       []string       `json:"allow_hosts,omitempty"` // network allow: where the egress proxy lets it go
	// NetworkDevice: network allow through the session's network device,
	// every connection and DNS, proxy-aware or not (else only what honours
	// HTTPS_PROXY reaches the proxy: run --scope, --sandbox landlock, or a
	// host whose /dev/net/tun is not the user's).
	NetworkDevice bool `json:"network_device,omitempty"`
	// Output is where the command's stdout and stderr went: "journal"
	// (mosaic start), "terminal" (mosaic run: the caller's terminal or
	// pipes, which the journal never saw), or "pty" (start --pty: a
	// terminal of its own, for mosaic attach).
	Output string `json:"output,omitempty"`
	// SeccompAllow are the rows of the syscall filter its profile lifted.
	SeccompAllow []string `json:"seccomp_allow,omitempty"`
	Sandbox      string   `json:"sandbox,omitempty"` // bwrap (or empty) or landlock (no bwrap)
	// HostExecWritable: started with --allow-write-host-exec, the
	// workspace's host-executed entries are writable.
	HostExecWritable bool `json:"host_exec_writable,omitempty"`
	// WorkspaceCopied: a clone-mode session, which wrote only its own copy:
	// nothing in the workspace is its to move aside at its end.
	WorkspaceCopied bool `json:"workspace_copied,omitempty"`
	// Injected are the credentials the egress proxy puts into requests,
	// each with its hosts; the session holds only placeholders for them.
	Injected    map[string][]string `json:"credentials_injected,omitempty"`
	Environment []string            `json:"environment,omitempty"` // non-secret NAME=VALUE the session was given
	// Published are its --publish ports, "ADDR:HOSTPORT -> PORT" (host
	// to session).
	Published []string `json:"published,omitempty"`
	// SSHKeysLent are the keys of the user's ssh agent lent to it
	// (--lend-ssh-key, --lend-ssh-sign), each "FINGERPRINT to ...".
	SSHKeysLent []string `json:"ssh_keys_lent,omitempty"`
	// GitLent are the repositories a git credential is lent for
	// (--lend-git), each "URL for OPS".
	GitLent []string `json:"git_lent,omitempty"`
	// PathDropped are the user's PATH directories the session's PATH
	// left out, each "DIR: why" (request.sessionPath).
	PathDropped []string `json:"path_dropped,omitempty"`
	// EnvironmentDropped are the names of the build settings of the user's
	// environment (credentials.BuildSettings) that were not passed, their
	// values looking like credentials.
	EnvironmentDropped []string `json:"environment_dropped,omitempty"`
	// Limits are the limits the session was started with, which status
	// shows once systemd has forgotten its unit.
	Limits *Limits `json:"limits,omitempty"`
	// OwnGitDir is the session's own repository, bound over the
	// workspace's .git placeholder (directfloor.OwnGitDir), which is removed
	// at its end.
	OwnGitDir string `json:"own_git_dir,omitempty"`
	// ToolCache is the directory of the tool caches the session shares with
	// its workspace's sessions started with the same powers
	// (request.ToolCacheDir), "" for none: a live grant gives it a power
	// the others lack (mosaic allow says so).
	ToolCache string `json:"tool_cache,omitempty"`
}

// Limits are a session's resource limits as it was started; 0 is none.
type Limits struct {
	MemoryMax uint64 `json:"memory_max,omitempty"` // bytes
	TasksMax  uint64 `json:"tasks_max,omitempty"`
	CPUQuota  uint64 `json:"cpu_quota_percent,omitempty"` // percent of one CPU
	TmpSize   uint64 `json:"tmp_size,omitempty"`          // the bound of its /tmp, bytes (Infinity: the kernel's default)
	HomeSize  uint64 `json:"home_size,omitempty"`         // the bound of its home, bytes
}

// Record is what mosaic keeps about a session beside its state: its
// description, and what only the host side needs of it.
type Record struct {
	Name string `json:"name"`
	Description
	Started time.Time `json:"started"`
	Kind    string    `json:"kind,omitempty"` // service (or empty) or scope
	// StartedBy is who started it: the mosaic command's uid, pid and
	// command line, or the bus's caller.
	StartedBy string `json:"started_by,omitempty"`
	// OldInjected is Injected as records written before Description
	// named it ("injected"); ReadChecked moves it into Injected.
	OldInjected map[string][]string `json:"injected,omitempty"`
}

const (
	recordFile   = "session.json"
	endFile      = "end.json"
	startingFile = "starting"
)

// MarkStarting says, before a start writes its record, that the session has
// not run yet, and removes the previous run's end.json (and its
// sandbox.OutputLostName): what is on disk from then on is never taken for
// this run's. MarkLaunched, once
// systemd has the unit (a scope: once its command runs), takes it back. A
// start killed in between leaves the mark, and the session is shown as one
// that never ran (Starting).
func MarkStarting(dir string) error {
	for _, f := range []string{endFile, sandbox.OutputLostName} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, startingFile), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// MarkLaunched removes the mark of MarkStarting.
func MarkLaunched(dir string) error {
	if err := os.Remove(filepath.Join(dir, startingFile)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// Starting reports whether the session's last start has not (yet) reached
// systemd: MarkStarting without MarkLaunched.
func Starting(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, startingFile))
	return err == nil
}

// Write writes the record into a session's state directory.
func Write(dir string, r Record) error {
	return WriteJSONAtomic(filepath.Join(dir, recordFile), r)
}

// maxRecord bounds what is read of a record: one holds a command line and
// binds, far below this.
const maxRecord = 16 << 20

// Read reads the record in a session's state directory.
func Read(dir string) (Record, bool) {
	r, err := ReadChecked(dir)
	return r, err == nil
}

// ReadChecked reads the record in a session's state directory and says what
// is wrong with it when it cannot: missing, not a regular file, truncated.
// It never blocks (a FIFO in its place is refused).
func ReadChecked(dir string) (Record, error) {
	var r Record
	b, err := regfile.Read(filepath.Join(dir, recordFile), true, maxRecord)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s is damaged: %w", recordFile, err)
	}
	if r.Injected == nil {
		r.Injected = r.OldInjected
	}
	r.OldInjected = nil
	return r, nil
}

// End is how a session ended, as systemd told its ExecStopPost (or as
// mosaic run saw its scope end).
type End struct {
	Result     string    `json:"result"`      // SERVICE_RESULT: success, exit-code, signal, timeout, oom-kill, ...
	ExitCode   string    `json:"exit_code"`   // EXIT_CODE: exited, killed, dumped
	ExitStatus string    `json:"exit_status"` // EXIT_STATUS: a number, or a signal name
	Ended      time.Time `json:"ended"`
	// EgressDied: the session's egress proxy had died when the session
	// ended (and systemd stopped the session with it, BindsTo=).
	EgressDied bool `json:"egress_died,omitempty"`
}

// WriteEnd writes end.json into a session's state directory. When the
// file system is full (a session filled its home, which shares it), the
// room ReserveEnd kept is given up for it: how the session ended is still
// recorded.
func WriteEnd(dir string, e End) error {
	err := WriteJSONAtomic(filepath.Join(dir, endFile), e)
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		if os.Remove(filepath.Join(dir, reserveFile)) == nil {
			err = WriteJSONAtomic(filepath.Join(dir, endFile), e)
		}
	}
	return err
}

// reserveFile keeps room on the state's file system for end.json.
const reserveFile = "end.reserve"

// ReserveEnd keeps room for end.json (WriteEnd): 64 KiB allocated at the
// start, when there is room, to be given up at the end if there is none.
// fallocate(2) allocates the blocks without writing them (0.34 against
// 0.51 ms for 64 KiB of zeros); a file system without it gets the zeros.
func ReserveEnd(dir string) error {
	path := filepath.Join(dir, reserveFile)
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && fi.Size() == reserveSize {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, reserveSize)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		_, err = f.Write(make([]byte, reserveSize))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

const reserveSize = 64 << 10

// ReadEnd reads end.json from a session's state directory.
func ReadEnd(dir string) (End, bool) {
	var e End
	b, err := regfile.Read(filepath.Join(dir, endFile), true, maxRecord)
	if err != nil || json.Unmarshal(b, &e) != nil {
		return e, false
	}
	return e, true
}

// Names lists the directories under stateRoot/sessions: the sessions
// that have a state directory, and whatever else is there (the caller checks
// each name).
func Names(stateRoot string) []string {
	entries, _ := os.ReadDir(filepath.Join(stateRoot, "sessions"))
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

// WriteJSONAtomic writes v to path, indented, with regfile.WriteAtomic
// (a record holds no secret and is written again at each start: no fsync).
func WriteJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return regfile.WriteAtomic(path, append(b, '\n'))
}

// OutputLost reports whether the session's output reached no journal (its
// exec shim found its stdout to be /dev/null, sandbox.OutputLostName).
func OutputLost(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, sandbox.OutputLostName))
	return err == nil
}
