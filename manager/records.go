package manager

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"mosaic/units/errcode"

	"golang.org/x/sys/unix"

	"mosaic/units"
)

// While systemd has a session's unit, systemd is the record of how it runs
// and how it ended. systemd collects a unit that ended cleanly at once, so the
// unit's ExecStopPost leaves end.json beside the session's record
// (session.json): together they answer `mosaic status` and `list --all`
// until `mosaic rm` or `mosaic gc`.

const endFile = "end.json"

// endRecord is how a session ended, as systemd told its ExecStopPost.
type endRecord struct {
	Result     string    `json:"result"`      // SERVICE_RESULT: success, exit-code, signal, timeout, oom-kill, ...
	ExitCode   string    `json:"exit_code"`   // EXIT_CODE: exited, killed, dumped
	ExitStatus string    `json:"exit_status"` // EXIT_STATUS: a number, or a signal name
	Ended      time.Time `json:"ended"`
}

// RecordEnd writes end.json into a session's state directory from the
// variables systemd gives ExecStopPost. It runs inside the ended session's
// unit, so it must be quick and never fail the unit.
func RecordEnd(stateDir string, getenv func(string) string) error {
	rec := endRecord{
		Result:     getenv("SERVICE_RESULT"),
		ExitCode:   getenv("EXIT_CODE"),
		ExitStatus: getenv("EXIT_STATUS"),
		Ended:      time.Now(),
	}
	if _, err := os.Stat(filepath.Join(stateDir, recordFile)); err != nil {
		return err // not a session's state directory (or already removed)
	}
	return writeJSONAtomic(filepath.Join(stateDir, endFile), rec)
}

func readEnd(dir string) (endRecord, bool) {
	var e endRecord
	b, err := os.ReadFile(filepath.Join(dir, endFile))
	if err != nil || json.Unmarshal(b, &e) != nil {
		return e, false
	}
	return e, true
}

// exitOf turns how the main process (bwrap) ended into the session's exit
// status and signal. bwrap, and mosaic's init, report a command killed by
// signal n as exit status 128+n: the signal is given back.
func exitOf(kind string, status int) (exit *int, signal string) {
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

// fromRecords is a session whose unit systemd no longer has, from what its
// state directory recorded.
func fromRecords(name, dir string) (Session, bool) {
	rec, ok := readRecord(dir)
	if !ok {
		return Session{}, false
	}
	s := Session{Name: name, Unit: units.UnitOf(name, rec.kind()), State: "inactive", SubState: "dead"}
	rec.describe(&s)
	if !rec.Started.IsZero() {
		t := rec.Started
		s.Since = &t
	}
	if end, ok := readEnd(dir); ok {
		s.Result = end.Result
		if s.Result != "" && s.Result != "success" {
			s.State, s.SubState = "failed", "failed"
		}
		status, err := strconv.Atoi(end.ExitStatus)
		if err != nil { // systemd names the signal of a killed process
			status = int(unix.SignalNum("SIG" + strings.TrimPrefix(end.ExitStatus, "SIG")))
		}
		s.ExitStatus, s.Signal = exitOf(end.ExitCode, status)
		t := end.Ended
		s.Ended = &t
	}
	return s, true
}

// recordedNames lists the sessions that have a state directory.
func recordedNames(p Paths) []string {
	entries, _ := os.ReadDir(filepath.Join(p.StateRoot, "sessions"))
	var names []string
	for _, e := range entries {
		if e.IsDir() && units.ValidateName(e.Name()) == nil {
			names = append(names, e.Name())
		}
	}
	return names
}

// ListAll is List plus the ended sessions whose units systemd has collected.
func (m *Manager) ListAll(ctx context.Context) ([]Session, error) {
	live, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, s := range live {
		seen[s.Name] = true
	}
	p := mustPaths()
	for _, name := range recordedNames(p) {
		if seen[name] {
			continue
		}
		if s, ok := fromRecords(name, p.SessionDir(name)); ok {
			live = append(live, s)
		}
	}
	sort.Slice(live, func(i, j int) bool { return live[i].Name < live[j].Name })
	return live, nil
}

// Remove forgets an ended session: its failed unit, if systemd still has
// one, and its state directory (home, /tmp, records). A running session is
// a refusal.
func (m *Manager) Remove(ctx context.Context, name string) error {
	s, err := m.Status(ctx, name)
	if err != nil {
		return err
	}
	if s.Running() {
		return errcode.SessionRunning.New("session %s is %s: stop it first with `mosaic stop %s`", name, s.State, name)
	}
	m.forget(ctx, s.Unit)
	p := mustPaths()
	os.RemoveAll(p.EgressDir(name)) // its proxy's socket directory
	if err := os.RemoveAll(p.SessionDir(name)); err != nil {
		return errcode.StateDir.New("cannot remove the state of session %s: %v", name, err)
	}
	return nil
}

// GC removes every ended session, as Remove does, and returns their names.
func (m *Manager) GC(ctx context.Context) ([]string, error) {
	all, err := m.ListAll(ctx)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, s := range all {
		if s.Running() {
			continue
		}
		if err := m.Remove(ctx, s.Name); err != nil {
			return removed, err
		}
		removed = append(removed, s.Name)
	}
	return removed, nil
}
