package bus

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"mosaic/internal/errcode"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/units"
)

// LogEvent is one line of the bus's launch log.
type LogEvent struct {
	Time  time.Time `json:"time"`
	Event string    `json:"event"` // launching (the intent), launch, launch-failed, refused, end
	// Session is the launched (or refused, or ended) session's name;
	// Invocation its unit's invocation id (launch, end).
	Session    string `json:"session,omitempty"`
	Invocation string `json:"invocation,omitempty"`
	// By is who asked: "user" or "session NAME" (launching, launch,
	// refused), ByInvocation that session's invocation id: who owns what
	// it launched.
	By           string `json:"by,omitempty"`
	ByInvocation string `json:"by_invocation,omitempty"`
	Verb         string `json:"verb,omitempty"`
	// Description is the session: as the request asked for it (launching,
	// launch-failed, refused: its profile, workspace and command), as it
	// was started (launch: the description its record holds), its profile
	// (end).
	records.Description
	// RecordStarted (launch) is the start time in the session's record the
	// launch wrote: a later start of the name by anyone else changes it.
	RecordStarted time.Time `json:"record_started,omitzero"`
	Code          string    `json:"code,omitempty"` // refused, launch-failed: the refusal's code
	Message       string    `json:"message,omitempty"`
	// end: how the session ended, as systemd reported it (or "unknown" when
	// it ended while the bus was down and left no record).
	Result     string `json:"result,omitempty"`
	ExitStatus *int   `json:"exit_status,omitempty"`
	Signal     string `json:"signal,omitempty"`
	// Recovered marks an end (or a launch) the bus found after a restart.
	Recovered bool `json:"recovered,omitempty"`
}

// LaunchLog is the append-only JSON-lines log of every launch, refusal and
// end: $XDG_STATE_HOME/mosaic/launches.jsonl, mode 0600. Each event is one
// write(2) of one line with O_APPEND, so concurrent writers never interleave.
type LaunchLog struct {
	path string
	mu   sync.Mutex
	f    *os.File
	torn bool // a write failed part way: the next event starts a new line
	// Warnings are the lines OpenLaunchLog skipped, one sentence each.
	Warnings []string
}

// LaunchLogPath is where the log lives.
func LaunchLogPath(p request.Paths) string { return filepath.Join(p.StateRoot, "launches.jsonl") }

// maxLogLine bounds a line the reader holds: every field an event takes
// from a request is clipped to maxField, so a line of the bus's own is a
// few KiB; a longer one (from a bus before the clipping) is skipped unread.
const maxLogLine = 1 << 20

// OpenLaunchLog opens the log for appending and reads what it holds. No
// line that a session's request can cause stops it: a line torn by a crash
// or a full disk (a JSON object cut short), an overlong line and an event
// that parses but makes no sense are skipped, each with a warning. Only a
// complete line that is not JSON at all, which no bus writes, is a refusal
// to go on (someone else edited the file): the message says to move it
// aside. The file is never truncated or rewritten; a torn last line gets
// its newline, so the next event starts a line of its own.
func OpenLaunchLog(path string) (*LaunchLog, []LogEvent, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, errcode.StateDir.New("cannot make %s: %w", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, errcode.LaunchLog.New("cannot open the launch log %s: %w", path, err)
	}
	l := &LaunchLog{path: path, f: f}
	var events []LogEvent
	r := bufio.NewReaderSize(f, 64<<10)
	terminated := true
	for n := 1; ; n++ {
		line, long, err := readLine(r)
		if err != nil && !errors.Is(err, io.EOF) {
			f.Close()
			return nil, nil, errcode.BadLaunchLog.New("the launch log %s cannot be read (%w): move it aside and start the bus again", path, err)
		}
		if long > 0 || len(line) > 0 {
			terminated = err == nil // ReadSlice found the newline
		}
		line = bytes.TrimSpace(line)
		switch {
		case long > 0:
			l.warn("line %d is %d bytes long, more than any event the bus writes: skipped", n, long)
		case len(line) == 0:
		default:
			var e LogEvent
			jerr := json.Unmarshal(line, &e)
			switch {
			case jerr == nil && e.Event != "" && (e.Session == "" || units.ValidateName(e.Session) == nil):
				events = append(events, e)
			case json.Valid(line):
				l.warn("line %d is not an event the bus knows: skipped", n)
			case torn(line, jerr) || !terminated:
				l.warn("line %d is cut short (a write the bus did not finish): skipped", n)
			default:
				f.Close()
				return nil, nil, errcode.BadLaunchLog.New("the launch log %s cannot be read at line %d (%w): move it aside (mv %s %s.bad) and start the bus again", path, n, jerr, path, path)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if !terminated {
		if _, err := f.Write([]byte("\n")); err != nil {
			l.torn = true // the next event starts with the newline
			l.warn("cannot end its torn last line (%v)", err)
		}
	}
	_ = f.Chmod(0o600)
	return l, events, nil
}

// readLine reads one line, newline included. A line longer than maxLogLine
// is read to its end without being kept: long is its length, line nil.
func readLine(r *bufio.Reader) (line []byte, long int, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if long > 0 || len(line)+len(chunk) > maxLogLine {
			long += len(line) + len(chunk)
			line = nil
		} else {
			line = append(line, chunk...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, long, err
		}
	}
}

// torn reports whether a line that did not parse is a JSON object cut
// short: what a crash or a full disk leaves of an event (maybe padded with
// the zeros a crash can leave at a file's end).
func torn(line []byte, err error) bool {
	line = bytes.TrimRight(line, "\x00")
	if len(line) == 0 {
		return true
	}
	var se *json.SyntaxError
	return line[0] == '{' && errors.As(err, &se) && se.Offset >= int64(len(line))
}

func (l *LaunchLog) warn(format string, args ...any) {
	l.Warnings = append(l.Warnings, fmt.Sprintf("the launch log %s: ", l.path)+fmt.Sprintf(format, args...))
}

// maxField bounds each field an event takes from a request.
const maxField = 1024

// clip cuts s to at most n bytes (at a character's start) and says so.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("…[%d bytes cut]", len(s)-cut)
}

// clipArgv keeps a command's words while they fit in n bytes together.
func clipArgv(argv []string, n int) []string {
	var out []string
	for i, a := range argv {
		if len(a) > n {
			a = clip(a, n)
		}
		if n -= len(a); n < 0 {
			return append(out, fmt.Sprintf("…[%d more words cut]", len(argv)-i))
		}
		out = append(out, a)
	}
	return out
}

// Append writes one event, every field from a request clipped to maxField.
func (l *LaunchLog) Append(e LogEvent) error {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	for _, f := range []*string{&e.Session, &e.Invocation, &e.By, &e.ByInvocation, &e.Verb, &e.Profile, &e.Workspace, &e.Code, &e.Message, &e.Result, &e.Signal} {
		*f = clip(*f, maxField)
	}
	e.Command = clipArgv(e.Command, maxField)
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.torn {
		b = append([]byte("\n"), b...)
	}
	n, err := l.f.Write(b)
	l.torn = n > 0 && n < len(b)
	if err != nil {
		return fmt.Errorf("writing the launch log %s: %w", l.path, err)
	}
	return nil
}

// Close closes the log.
func (l *LaunchLog) Close() error { return l.f.Close() }

// replay reads the log's story: the sessions launched (or being launched,
// an intent without its launch) and not ended, by name; and who made each
// name's state by launching it last. Events about names that are not
// session names are not the bus's and are skipped.
func replay(events []LogEvent) (open map[string]LogEvent, created map[string]creation) {
	open, created = map[string]LogEvent{}, map[string]creation{}
	for _, e := range events {
		if units.ValidateName(e.Session) != nil {
			continue
		}
		switch e.Event {
		case "launching":
			open[e.Session] = e
		case "launch":
			open[e.Session] = e
			c := creation{started: e.RecordStarted}
			if strings.HasPrefix(e.By, "session ") {
				c.launcher = e.ByInvocation
			}
			created[e.Session] = c
		case "launch-failed":
			if open[e.Session].Event == "launching" {
				delete(open, e.Session)
			}
		case "end":
			delete(open, e.Session)
		}
	}
	return open, created
}
