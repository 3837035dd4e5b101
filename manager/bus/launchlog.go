package bus

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"mosaic/manager/request"
	"mosaic/units/errcode"
)

// LogEvent is one line of the bus's launch log.
type LogEvent struct {
	Time    time.Time `json:"time"`
	Event   string    `json:"event"` // launch, refused, end
	Session string    `json:"session,omitempty"`
	By      string    `json:"by,omitempty"` // "user" or "session NAME": who asked (launch, refused)
	Verb    string    `json:"verb,omitempty"`
	Profile string    `json:"profile,omitempty"`
	Command []string  `json:"command,omitempty"`
	// Workspace is the launched (or refused) session's workspace.
	Workspace string `json:"workspace,omitempty"`
	Code      string `json:"code,omitempty"` // refused: the refusal's code
	Message   string `json:"message,omitempty"`
	// end: how the session ended, as systemd reported it (or "unknown" when
	// it ended while the bus was down and left no record).
	Result     string `json:"result,omitempty"`
	ExitStatus *int   `json:"exit_status,omitempty"`
	Signal     string `json:"signal,omitempty"`
	// Recovered marks an end the bus found after a restart.
	Recovered bool `json:"recovered,omitempty"`
}

// LaunchLog is the append-only JSON-lines log of every launch, refusal and
// end: $XDG_STATE_HOME/mosaic/launches.jsonl, mode 0600. Each event is one
// write(2) of one line with O_APPEND, so concurrent writers never interleave.
type LaunchLog struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

// LaunchLogPath is where the log lives.
func LaunchLogPath(p request.Paths) string { return filepath.Join(p.StateRoot, "launches.jsonl") }

// OpenLaunchLog opens the log for appending and reads what it holds. A line
// that is not an event is a refusal to go on (the file is never truncated or
// rewritten): the message says to move it aside.
func OpenLaunchLog(path string) (*LaunchLog, []LogEvent, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, errcode.StateDir.New("cannot make %s: %v", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, errcode.LaunchLog.New("cannot open the launch log %s: %v", path, err)
	}
	var events []LogEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e LogEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Event == "" {
			f.Close()
			return nil, nil, errcode.BadLaunchLog.New("the launch log %s cannot be read at line %d (%s): move it aside (mv %s %s.bad) and start the bus again", path, n, lineError(err), path, path)
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		f.Close()
		return nil, nil, errcode.BadLaunchLog.New("the launch log %s cannot be read (%v): move it aside and start the bus again", path, err)
	}
	_ = f.Chmod(0o600)
	return &LaunchLog{path: path, f: f}, events, nil
}

func lineError(err error) string {
	if err == nil {
		return "no event"
	}
	return err.Error()
}

// Append writes one event.
func (l *LaunchLog) Append(e LogEvent) error {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("writing the launch log %s: %v", l.path, err)
	}
	return nil
}

// Close closes the log.
func (l *LaunchLog) Close() error { return l.f.Close() }

// openLaunches are the sessions the log shows as launched and not ended.
func openLaunches(events []LogEvent) map[string]LogEvent {
	open := map[string]LogEvent{}
	for _, e := range events {
		switch e.Event {
		case "launch":
			open[e.Session] = e
		case "end":
			delete(open, e.Session)
		}
	}
	return open
}
