// Package audit makes one time-ordered record of a session (mosaic audit):
// its start, end and change from its state directory's records, which only
// mosaic writes, and every audit event the journal holds for it (units/
// journald's MESSAGE_IDs), each trusted only from the unit that writes its
// kind: a session's own output, or an entry a session sends to journald,
// is never taken for one. It runs on the host, in the mosaic command.
package audit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	"mosaic/internal/journald"
	"mosaic/manager/records"
)

// Event is one line of a session's audit: when, a stable id (the same
// event has the same id at every reading), its kind, a sentence, and its
// facts under stable names (the journal's MOSAIC_* fields, lower case
// without the prefix).
type Event struct {
	Time    time.Time         `json:"time"`
	ID      string            `json:"id"`
	Event   string            `json:"event"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
	// MessageID is the journal entry's MESSAGE_ID (journalctl -x explains
	// it); empty for what comes from the records.
	MessageID string `json:"message_id,omitempty"`
}

// The kinds of events made from the records.
const (
	KindStart  = "session-start"
	KindEnd    = "session-end"
	KindChange = "change"
)

// writers says, for each MESSAGE_ID, which unit may write it: a template
// where %s is the session's name. The change's events (ChangeApplied,
// ChangeDiscarded), which the user's mosaic command writes for the journal
// to ship, come from clone.json here, which is written under the session's
// lock before them.
var writers = map[string]string{
	journald.EgressGrant:      "mosaic-%s-egress.service",
	journald.EgressRevoke:     "mosaic-%s-egress.service",
	journald.EgressExpire:     "mosaic-%s-egress.service",
	journald.EgressRefused:    "mosaic-%s-egress.service",
	journald.EgressConnection: "mosaic-%s-egress.service",
	journald.BusLaunch:        "mosaic-bus.service",
	journald.SSHAgentUse:      "mosaic-%s-ssh-agent.service",
	journald.GitLendUse:       "mosaic-%s-egress.service",
}

// Trusted reports whether journal entry e (journalctl -o json's fields)
// is an audit event of session name written by the unit its kind allows.
func Trusted(e map[string]string, name string) bool {
	w, ok := writers[e["MESSAGE_ID"]]
	if !ok || e["SYSLOG_IDENTIFIER"] != journald.Identifier || e["_TRANSPORT"] != "journal" {
		return false
	}
	if e["MOSAIC_SESSION"] != name && !(e["MESSAGE_ID"] == journald.BusLaunch && e["MOSAIC_PARENT"] == name) {
		return false
	}
	if strings.Contains(w, "%s") {
		w = fmt.Sprintf(w, name)
	}
	return e["_SYSTEMD_USER_UNIT"] == w
}

// FromJournal is the event of a trusted entry.
func FromJournal(e map[string]string) Event {
	ev := Event{ID: idOf(e["__CURSOR"]), Event: e["MOSAIC_EVENT"], Message: strings.TrimPrefix(e["MESSAGE"], "mosaic audit: "),
		MessageID: e["MESSAGE_ID"], Fields: map[string]string{}}
	if us, err := strconv.ParseInt(e["__REALTIME_TIMESTAMP"], 10, 64); err == nil {
		ev.Time = time.UnixMicro(us).UTC()
	}
	for k, v := range e {
		if f, ok := strings.CutPrefix(k, "MOSAIC_"); ok && k != "MOSAIC_EVENT" {
			ev.Fields[strings.ToLower(f)] = v
		}
	}
	return ev
}

// idOf is a stable id for a journal cursor (short, unlike the cursor).
func idOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// FromRecords are the events the session's records say: its start, its
// end (when it ended) and its change (clone mode, once read).
func FromRecords(rec records.Record, end *records.End, cl *records.Clone) []Event {
	start := Event{Time: rec.Started.UTC(), Event: KindStart, Fields: map[string]string{
		"session": rec.Name, "profile": rec.Profile, "workspace": rec.Workspace, "network": rec.Network,
		"workspace_mode": "direct", "command": strings.Join(rec.Command, " "), "sandbox": rec.Sandbox,
		"allow_hosts": strings.Join(rec.AllowHosts, ","), "credentials": strings.Join(rec.Credentials, ","),
		"by": rec.StartedBy,
	}}
	if rec.WorkspaceCopied {
		start.Fields["workspace_mode"] = "clone"
	}
	if cl != nil {
		start.Fields["base"] = cl.Base
	}
	start.Message = fmt.Sprintf("started %s (profile %s, network %s, %s mode) in %s", start.Fields["command"], rec.Profile, rec.Network, start.Fields["workspace_mode"], rec.Workspace)
	events := []Event{start}
	if cl != nil && cl.Snapshot != nil && cl.Summary != nil {
		ch := Event{Time: cl.Snapshot.UTC(), Event: KindChange, Message: "change: " + cl.Line(), Fields: map[string]string{
			"session": rec.Name, "files": strconv.Itoa(len(cl.Summary.Files)), "insertions": strconv.Itoa(cl.Summary.Added),
			"deletions": strconv.Itoa(cl.Summary.Deleted), "applied": cl.Applied, "discarded": strconv.FormatBool(cl.Discarded)}}
		var hostRun []string
		for _, f := range cl.Summary.Files {
			if f.HostRun != "" {
				hostRun = append(hostRun, f.Path)
			}
		}
		ch.Fields["host_run"] = strings.Join(hostRun, ",")
		if cl.PatchBytes > 0 {
			ch.Fields["patch_bytes"] = strconv.FormatInt(cl.PatchBytes, 10)
		}
		events = append(events, ch)
		if cl.DoneAt != nil && (cl.Applied != "" || cl.Discarded) {
			done := Event{Time: cl.DoneAt.UTC(), Event: "change-applied", Message: fmt.Sprintf("the change was applied (%s) by %s", cl.Applied, cl.DoneBy),
				MessageID: journald.ChangeApplied, Fields: map[string]string{"session": rec.Name, "applied": cl.Applied, "by": cl.DoneBy}}
			if cl.Discarded {
				done.Event, done.Message, done.MessageID = "change-discarded", "the change was discarded by "+cl.DoneBy, journald.ChangeDiscarded
			}
			events = append(events, done)
		}
	}
	if end != nil {
		events = append(events, Event{Time: end.Ended.UTC(), Event: KindEnd,
			Message: fmt.Sprintf("ended: %s (%s %s)", end.Result, end.ExitCode, end.ExitStatus),
			Fields:  map[string]string{"session": rec.Name, "result": end.Result, "exit_code": end.ExitCode, "exit_status": end.ExitStatus}})
	}
	for i := range events {
		events[i].ID = idOf(rec.Name + "\x00" + rec.Started.String() + "\x00" + events[i].Event)
	}
	return events
}

// Merge orders events by time, the records' start first and end last
// among equals.
func Merge(events []Event) []Event {
	rank := func(e Event) int {
		switch e.Event {
		case KindStart:
			return 0
		case KindEnd:
			return 2
		}
		return 1
	}
	sort.SliceStable(events, func(i, j int) bool {
		if !events[i].Time.Equal(events[j].Time) {
			return events[i].Time.Before(events[j].Time)
		}
		return rank(events[i]) < rank(events[j])
	})
	return events
}

// Journal reads session name's audit entries since since from the user's
// journal (after cursor, when given), trusted ones only, and the cursor of
// the last entry read.
func Journal(ctx context.Context, name string, since time.Time, cursor string) ([]Event, string, error) {
	args := []string{"--user", "--no-pager", "-q", "-o", "json", "--output-fields=" + strings.Join(outputFields, ",")}
	if cursor != "" {
		args = append(args, "--after-cursor", cursor)
	} else {
		args = append(args, "--since", since.Add(-time.Second).Local().Format("2006-01-02 15:04:05"))
	}
	args = append(args, "SYSLOG_IDENTIFIER="+journald.Identifier, "MOSAIC_SESSION="+name, "+",
		"SYSLOG_IDENTIFIER="+journald.Identifier, "MOSAIC_PARENT="+name)
	out, err := exec.CommandContext(ctx, "journalctl", args...).Output()
	if err != nil && len(out) == 0 {
		if ee, ok := err.(*exec.ExitError); ok && len(bytes.TrimSpace(ee.Stderr)) == 0 {
			return nil, cursor, nil // no entries
		}
		return nil, cursor, fmt.Errorf("reading the journal: %w", err)
	}
	var events []Event
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		e := entry(sc.Bytes())
		if e == nil {
			continue
		}
		cursor = e["__CURSOR"]
		if Trusted(e, name) {
			events = append(events, FromJournal(e))
		}
	}
	return events, cursor, nil
}

// outputFields are the journal fields the audit reads (besides the
// cursor and timestamps journalctl always writes).
var outputFields = []string{"MESSAGE", "MESSAGE_ID", "SYSLOG_IDENTIFIER", "_TRANSPORT", "_SYSTEMD_USER_UNIT", "_SYSTEMD_UNIT",
	"MOSAIC_SESSION", "MOSAIC_PARENT", "MOSAIC_EVENT", "MOSAIC_ENTRY", "MOSAIC_HOSTS", "MOSAIC_BY", "MOSAIC_UNTIL", "MOSAIC_HOST",
	"MOSAIC_PORT", "MOSAIC_REASON", "MOSAIC_BYTES_IN", "MOSAIC_BYTES_OUT", "MOSAIC_METHOD", "MOSAIC_PATH", "MOSAIC_CREDENTIAL",
	"MOSAIC_FILES", "MOSAIC_WORKSPACE", "MOSAIC_APPLIED", "MOSAIC_PROFILE", "MOSAIC_COUNT"}

// entry reads one line of journalctl -o json, keeping string fields (a
// field journald stored as bytes is an array: not one mosaic writes).
func entry(line []byte) map[string]string {
	var raw map[string]any
	if json.Unmarshal(line, &raw) != nil {
		return nil
	}
	e := map[string]string{}
	for k, v := range raw {
		if s, ok := v.(string); ok {
			e[k] = s
		}
	}
	return e
}
