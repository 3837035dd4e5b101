// Package records keeps what mosaic knows of a session beside its state
// directory ($XDG_STATE_HOME/mosaic/sessions/NAME/): session.json (what
// systemd does not know: the binds' reasons, the workspace as given, the
// profile), written at each start, and end.json (how it ended), written by
// the unit's own ExecStopPost: the session-ended stage, whose argv writer
// (EndedArgv) and parser (EndedMain) are both here. While systemd has a
// session's unit, systemd is the record of how it runs and ended; systemd
// collects a unit that ended cleanly at once, and then these files answer
// `mosaic status` and `list --all` until `mosaic rm` or `mosaic gc`.
package records

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"mosaic/sandbox"
	"mosaic/units/regfile"
)

// Record is what mosaic keeps about a session beside its state.
type Record struct {
	Name        string         `json:"name"`
	Command     []string       `json:"command"`
	Workspace   string         `json:"workspace"`
	GivenAs     string         `json:"workspace_given_as,omitempty"`
	Binds       []sandbox.Bind `json:"binds"`
	Started     time.Time      `json:"started"`
	Profile     string         `json:"profile,omitempty"`
	Credentials []string       `json:"credentials,omitempty"` // names only
	Kind        string         `json:"kind,omitempty"`        // service (or empty) or scope
	MayLaunch   bool           `json:"may_launch,omitempty"`  // the bus lets it launch sessions
	Network     string         `json:"network,omitempty"`
	AllowHosts  []string       `json:"allow_hosts,omitempty"`
	// Injected are the credentials the egress proxy puts into requests,
	// each with its hosts; the session holds only placeholders for them.
	Injected map[string][]string `json:"injected,omitempty"`
	// Output is where the command's stdout and stderr went: "journal"
	// (mosaic start), or "terminal" (mosaic run: the caller's terminal or
	// pipes, which the journal never saw).
	Output  string `json:"output,omitempty"`
	Sandbox string `json:"sandbox,omitempty"` // bwrap (or empty) or landlock
	// SeccompAllow are the rows of the syscall filter the profile lifted.
	SeccompAllow []string `json:"seccomp_allow,omitempty"`
	// HostExecWritable: started with --allow-write-host-exec, the
	// workspace's host-executed entries are writable.
	HostExecWritable bool `json:"host_exec_writable,omitempty"`
	// HostExecMissing are the host-executed entries that did not exist
	// at the start: what the session creates there is moved aside at its end.
	HostExecMissing []string `json:"host_exec_missing,omitempty"`
	Environment     []string `json:"environment,omitempty"` // non-secret NAME=VALUE the session was given
	// PathDropped are the user's PATH directories left out of the
	// session's, each "DIR: why"; Limits the limits it was started with.
	PathDropped []string `json:"path_dropped,omitempty"`
	Limits      *Limits  `json:"limits,omitempty"`
	// OwnGitDir is the session's own repository, bound over the
	// workspace's .git placeholder (sandbox.OwnGitDir), removed at its end.
	OwnGitDir string `json:"own_git_dir,omitempty"`
}

// Limits are a session's resource limits as it was started; 0 is none.
type Limits struct {
	MemoryMax uint64 `json:"memory_max,omitempty"` // bytes
	TasksMax  uint64 `json:"tasks_max,omitempty"`
	CPUQuota  uint64 `json:"cpu_quota_percent,omitempty"` // percent of one CPU
}

const (
	recordFile = "session.json"
	endFile    = "end.json"
)

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
		return r, fmt.Errorf("%s is damaged: %v", recordFile, err)
	}
	return r, nil
}

// End is how a session ended, as systemd told its ExecStopPost (or as
// mosaic run saw its scope end).
type End struct {
	Result     string    `json:"result"`      // SERVICE_RESULT: success, exit-code, signal, timeout, oom-kill, ...
	ExitCode   string    `json:"exit_code"`   // EXIT_CODE: exited, killed, dumped
	ExitStatus string    `json:"exit_status"` // EXIT_STATUS: a number, or a signal name
	Ended      time.Time `json:"ended"`
	// MovedAside are the host-executed entries the session created, moved
	// aside when it ended (sandbox.MoveAsideCreated).
	MovedAside []sandbox.MovedAside `json:"moved_aside,omitempty"`
}

// WriteEnd writes end.json into a session's state directory.
func WriteEnd(dir string, e End) error {
	return WriteJSONAtomic(filepath.Join(dir, endFile), e)
}

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

// WriteJSONAtomic writes v to path through a temporary file of a name of its
// own and a rename, so that a reader sees a whole record or none, and two
// writers never share a temporary file. A record holds no secret and is
// rewritten at each start, so it is not fsynced (that is for credentials).
func WriteJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	tmp := path + ".tmp-" + hex.EncodeToString(r[:])
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
