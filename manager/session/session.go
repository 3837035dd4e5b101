// Package session is what mosaic reports about a session (Session), built
// from systemd's properties of its unit (Of) or, once systemd has forgotten
// the unit, from the records beside its state (FromRecords).
package session

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/manager/records"
	"mosaic/sandbox"
	"mosaic/sandbox/egress"
	"mosaic/units"
)

// Session is what mosaic reports about one session: systemd is the source
// of the fields before its Description, the session's record of that, and
// the last ones are what mosaic found on disk (Problem).
type Session struct {
	Name string `json:"name"`
	Unit string `json:"unit"`
	// InvocationID is systemd's id of this start of the unit (hex): a
	// later session of the same name has another.
	InvocationID string     `json:"invocation_id,omitempty"`
	Kind         string     `json:"kind"` // service, or scope (bwrap's sandbox alone, started by mosaic run --scope)
	State        string     `json:"state"`
	SubState     string     `json:"sub_state"`
	Result       string     `json:"result,omitempty"`
	MainPID      uint32     `json:"main_pid,omitempty"`
	ExitStatus   *int       `json:"exit_status,omitempty"`
	Signal       string     `json:"signal,omitempty"`
	Since        *time.Time `json:"since,omitempty"` // when the command started
	Ended        *time.Time `json:"ended,omitempty"`
	MemoryBytes  *uint64    `json:"memory_bytes,omitempty"`
	Tasks        *uint64    `json:"tasks,omitempty"`
	CPUNSec      *uint64    `json:"cpu_nsec,omitempty"`
	PIDs         []uint32   `json:"pids,omitempty"`
	// The unit's limits; nil is none (infinity).
	MemoryMax *uint64 `json:"memory_max,omitempty"`
	TasksMax  *uint64 `json:"tasks_max,omitempty"`
	CPUQuota  *uint64 `json:"cpu_quota_percent,omitempty"`
	// StoppedBy, for a session mosaic run watched end, says why it was
	// stopped rather than ending by itself: "signal" (mosaic run was
	// interrupted), "outside" (mosaic stop, systemctl --user stop),
	// "runtime-max".
	StoppedBy string `json:"stopped_by,omitempty"`

	// Description is what the session's record says it is (none for a
	// session with no record, a unit mosaic did not start).
	records.Description
	// Clone is a clone-mode session's copy and change, from its clone.json
	// (nil: direct mode, the session wrote the workspace itself).
	Clone *records.Clone `json:"clone,omitempty"`
	// EgressDied (network allow): its egress proxy is dead, so it has no
	// network, and systemd stops it with the proxy (or did: how it ended).
	EgressDied bool `json:"egress_died,omitempty"`
	// EgressRecord (network allow, once it ended) is what its egress
	// proxy left: the refusals, the list and the grants as it stopped.
	EgressRecord *egress.Record `json:"egress_record,omitempty"`
	// Home is what its init said of its home when it ended (or, state
	// "running" in an ended session, that it was killed before it could
	// save it); nil before it ends, and for a session that never loaded it.
	Home *sandbox.HomeReport `json:"home,omitempty"`
	// Problem says what is wrong with a session mosaic cannot fully read
	// (a damaged record); rm removes it.
	Problem string `json:"problem,omitempty"`
}

// Running reports whether the session's unit is up, on its way up, or on
// its way down (its processes are still there).
func (s Session) Running() bool {
	return s.State == "active" || s.State == "activating" || s.State == "reloading" || s.State == "deactivating"
}

// ChangeUnknown reports whether s is a clone-mode session that has ended
// since its change was last read (or was never read): its finish step has
// not seen what the agent left.
func (s Session) ChangeUnknown() bool {
	if s.Clone == nil || s.Running() || s.Clone.Applied != "" || s.Clone.Discarded {
		return false
	}
	return s.Clone.Snapshot == nil || (s.Ended != nil && !s.Clone.Snapshot.After(*s.Ended))
}

// How describes how the main process ended: "exit status N" or "killed by
// SIGNAME"; "" while it runs.
func (s Session) How() string {
	switch {
	case s.Signal != "":
		return "killed by " + s.Signal
	case s.ExitStatus != nil:
		return fmt.Sprintf("exit status %d", *s.ExitStatus)
	}
	return ""
}

// ExitCode is the shell-style exit code of an ended session: the status, or
// 128+n for a death by signal n.
func (s Session) ExitCode() int {
	if s.ExitStatus != nil {
		return *s.ExitStatus
	}
	return 1
}

// Of builds a Session from the unit's Unit and Service (or Scope)
// properties; its cgroup counters are not among them (package cgcount).
func Of(name, kind string, up, sp map[string]any) Session {
	s := Session{Name: name, Unit: units.UnitOf(name, kind), Kind: kind}
	s.State, _ = up["ActiveState"].(string)
	s.SubState, _ = up["SubState"].(string)
	if id, _ := up["InvocationID"].([]byte); len(id) > 0 {
		s.InvocationID = hex.EncodeToString(id)
	}
	s.Result, _ = sp["Result"].(string)
	s.MainPID, _ = sp["MainPID"].(uint32)
	start, _ := sp["ExecMainStartTimestamp"].(uint64)
	if kind == units.KindScope {
		start, _ = up["ActiveEnterTimestamp"].(uint64)
	}
	if ts := start; ts > 0 {
		t := time.UnixMicro(int64(ts))
		s.Since = &t
	}
	code, _ := sp["ExecMainCode"].(int32)
	status, _ := sp["ExecMainStatus"].(int32)
	kinds := map[int32]string{1: "exited", 2: "killed", 3: "dumped"} // CLD_* codes
	s.ExitStatus, s.Signal = Exit(kinds[code], int(status))
	if ts, _ := sp["ExecMainExitTimestamp"].(uint64); ts > 0 && s.ExitStatus != nil {
		t := time.UnixMicro(int64(ts))
		s.Ended = &t
	}
	s.MemoryMax = counter(sp["MemoryMax"])
	s.TasksMax = counter(sp["TasksMax"])
	if q := counter(sp["CPUQuotaPerSecUSec"]); q != nil {
		pct := *q / 10000
		s.CPUQuota = &pct
	}
	return s
}

// counter returns a cgroup counter, or nil where systemd reports it as
// unavailable (the maximum uint64).
func counter(v any) *uint64 {
	n, ok := v.(uint64)
	if !ok || n == math.MaxUint64 {
		return nil
	}
	return &n
}

// Describe fills in what a session's record knows of s: its description
// (with the defaults of records older than a field) and kind.
func Describe(r records.Record, s *Session) {
	s.Description = r.Description
	s.Kind = KindOf(r)
	if s.Sandbox == "" {
		s.Sandbox = sandbox.ModeBwrap
	}
	if l := r.Limits; l != nil && s.MemoryMax == nil && s.TasksMax == nil && s.CPUQuota == nil {
		// Ended and collected: systemd no longer says, the record does.
		nonzero := func(v uint64) *uint64 {
			if v == 0 {
				return nil
			}
			return &v
		}
		s.MemoryMax, s.TasksMax, s.CPUQuota = nonzero(l.MemoryMax), nonzero(l.TasksMax), nonzero(l.CPUQuota)
	}
	if s.Network == "" {
		s.Network = sandbox.NetworkHost // recorded before sessions had a network of their own
	}
}

// KindOf is the record's kind: service (the default, for records written
// before scopes existed) or scope.
func KindOf(r records.Record) string {
	if r.Kind == "" {
		return units.KindService
	}
	return r.Kind
}

// Exit turns how the main process (bwrap) ended into the session's exit
// status and signal. bwrap, and mosaic's init, report a command killed by
// signal n as exit status 128+n: the signal is given back.
func Exit(kind string, status int) (exit *int, signal string) {
	switch kind {
	case "exited":
		e := status
		if status > 128 && status <= 128+64 {
			signal = unix.SignalName(unix.Signal(status - 128))
		}
		return &e, signal
	case "killed", "dumped":
		e := 128 + status
		return &e, unix.SignalName(unix.Signal(status))
	}
	return nil, ""
}

// EgressRecordOf is the record the egress proxy of the session whose state
// directory is dir left, or nil.
func EgressRecordOf(dir string) *egress.Record {
	if r, ok := egress.ReadRecord(egress.RecordDir(dir)); ok {
		return &r
	}
	return nil
}

// FromRecords is a session whose unit systemd no longer has, from what its
// state directory recorded. A state directory whose record cannot be read
// is still a session, with its Problem said: list --all shows it, and rm
// and gc can remove it.
func FromRecords(name, dir string) (Session, bool) {
	rec, err := records.ReadChecked(dir)
	if err != nil {
		if fi, lerr := os.Lstat(dir); lerr != nil || !fi.IsDir() {
			return Session{}, false
		}
		if errors.Is(err, fs.ErrNotExist) && onlyHome(dir) {
			// Not damaged: a home made with mosaic home --create,
			// for a session that has not run yet.
			return Session{Name: name, Unit: units.UnitName(name), Kind: units.KindService, State: "inactive", SubState: NotRunYet}, true
		}
		return Session{Name: name, Unit: units.UnitName(name), Kind: units.KindService, State: "inactive", SubState: "dead",
			Problem: "its record cannot be read: " + err.Error() + " (`mosaic rm " + name + "` removes it)"}, true
	}
	s := Session{Name: name, Unit: units.UnitOf(name, KindOf(rec)), State: "inactive", SubState: "dead"}
	Describe(rec, &s)
	s.Clone, _ = records.ReadClone(dir)
	s.EgressRecord = EgressRecordOf(dir)
	if !rec.Started.IsZero() {
		t := rec.Started
		s.Since = &t
	}
	if records.Starting(dir) {
		// Killed between its state and systemd: it never ran. (A start
		// under way holds the name and is not listed meanwhile as ended.)
		s.SubState = "never-started"
		s.Since = nil
		s.Problem = "it never ran: its start was cut short before systemd took it, or is under way (`mosaic rm " + name + "` removes what it left)"
		return s, true
	}
	// An end from before this run's start is an earlier run's (a record
	// written before MarkStarting removed the old one): not this one's.
	if end, ok := records.ReadEnd(dir); ok && !end.Ended.Before(rec.Started) {
		s.Result = end.Result
		if s.Result != "" && s.Result != "success" {
			s.State, s.SubState = "failed", "failed"
		}
		status, err := strconv.Atoi(end.ExitStatus)
		if err != nil { // systemd names the signal of a killed process
			status = int(unix.SignalNum("SIG" + strings.TrimPrefix(end.ExitStatus, "SIG")))
		}
		s.ExitStatus, s.Signal = Exit(end.ExitCode, status)
		t := end.Ended
		s.Ended = &t
		s.EgressDied = end.EgressDied
	}
	s.Home = HomeOf(dir)
	return s, true
}

// NotRunYet is the sub-state of a session whose home was made (mosaic home
// --create) before it ever ran.
const NotRunYet = "not-run-yet"

// onlyHome reports whether a state directory holds its home alone (made by
// `mosaic home --create` before any run).
func onlyHome(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Name() != "home" {
			return false
		}
	}
	return true
}

// HomeOf is what the init of the session whose state is dir said of its
// home (sandbox.HomeReport); nil for none.
func HomeOf(dir string) *sandbox.HomeReport {
	if r, ok := sandbox.ReadHomeReport(dir); ok {
		return &r
	}
	return nil
}

// HomeLine says in one line what became of an ended session's home: saved
// (or why not), and whether it or /tmp reached its bound; "" when there is
// nothing to say.
func (s Session) HomeLine() string {
	h := s.Home
	if h == nil || s.Running() {
		return ""
	}
	var parts []string
	if h.Full {
		parts = append(parts, fmt.Sprintf("it reached its bound (--home-size %s): writes there failed with \"No space left on device\"", sandbox.SizeText(h.Size)))
	}
	if h.TmpFull {
		parts = append(parts, "its /tmp reached its bound (--tmp-size): writes there failed with \"No space left on device\"")
	}
	switch h.State {
	case sandbox.HomeRunning, sandbox.HomeInSave:
		parts = append(parts, "NOT saved: the session was killed before its init could save it (SIGKILL, out of memory, or a save longer than its stop timeout); the kept home is as it was when the session started")
	case sandbox.HomeNotSaved:
		parts = append(parts, "NOT saved ("+h.Error+"); the kept home is as it was when the session started")
	case sandbox.HomeSaved:
		saved := fmt.Sprintf("saved (%d files, %s", h.Saved.Files, sandbox.SizeText(uint64(h.Saved.Bytes)))
		if h.Saved.Unchanged > 0 {
			saved += fmt.Sprintf("; %d unchanged, not written again", h.Saved.Unchanged)
		}
		saved += ")"
		if skipped := skippedText(h.Saved.Skipped); skipped != "" {
			saved += "; left out: " + skipped
		}
		parts = append(parts, saved)
	}
	return strings.Join(parts, "; ")
}

// skippedText names what a save left out, but the mount points bwrap made.
func skippedText(skipped map[string]int) string {
	var out []string
	for _, why := range []string{"fifo", "socket", "device", "too-large", "too-deep", "too-many"} {
		if n := skipped[why]; n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, why))
		}
	}
	return strings.Join(out, ", ")
}
