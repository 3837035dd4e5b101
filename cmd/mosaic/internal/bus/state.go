package bus

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"mosaic/manager"
	"mosaic/manager/records"
	"mosaic/manager/session"
	"mosaic/units"
)

// adopt takes over what runs now, from one List: the sessions the log
// shows launched (and, for those launched by sessions, who owns them, by
// invocation id), and records an end for every one that ended while no bus
// was watching. A launch the bus died in the middle of (an intent without
// its launch) is completed when its session runs.
func (b *bus) adopt(ctx context.Context, events []LogEvent) error {
	list, err := b.m.ListInvocations(ctx)
	if err != nil {
		return err
	}
	byName := map[string]manager.Session{}
	open, created := replay(events)
	b.mu.Lock()
	for _, s := range list {
		byName[s.Name] = s
		if s.Running() {
			b.running[s.Unit] = true
		}
	}
	b.created = created
	b.mu.Unlock()
	names := make([]string, 0, len(open))
	for name := range open {
		names = append(names, name)
	}
	sort.Strings(names)
	adopted := 0
	for _, name := range names {
		l := open[name]
		s, listed := byName[name]
		same := listed && (l.Invocation == "" || l.Invocation == s.InvocationID)
		if same && s.Running() {
			adopted++
			if l.Event == "launching" {
				done := l
				done.Time, done.Event, done.Invocation, done.Recovered = time.Time{}, "launch", s.InvocationID, true
				if rec, ok := records.Read(b.paths.SessionDir(name)); ok {
					done.RecordStarted = rec.Started
				}
				b.appendOrWarn(done)
				b.mu.Lock()
				b.created[name] = creation{launcher: done.ByInvocation, started: done.RecordStarted}
				b.mu.Unlock()
			}
			if strings.HasPrefix(l.By, "session ") && l.ByInvocation != "" && s.InvocationID != "" {
				b.mu.Lock()
				b.seq++
				b.children[s.InvocationID] = child{name: name, profile: l.Profile, launcher: l.ByInvocation, seq: b.seq}
				b.mu.Unlock()
			}
			continue
		}
		end := LogEvent{Event: "end", Session: name, Invocation: l.Invocation, Result: "unknown", Recovered: true}
		end.Profile = l.Profile
		if same {
			end.Invocation = s.InvocationID
			if s.Result != "" {
				end.Result = s.Result
			}
			end.ExitStatus, end.Signal = s.ExitStatus, s.Signal
		} else if !listed {
			// systemd collected it: its own record says how it ended.
			if s, ok := session.FromRecords(name, b.paths.SessionDir(name)); ok {
				if s.Result != "" {
					end.Result = s.Result
				}
				end.ExitStatus, end.Signal = s.ExitStatus, s.Signal
			}
		}
		b.appendOrWarn(end)
		fmt.Fprintf(os.Stderr, "mosaic bus: session %s ended while no bus was watching (%s)\n", name, end.Result)
	}
	fmt.Fprintf(os.Stderr, "mosaic bus: adopted %d running sessions (%d launched through the bus)\n", len(list), adopted)
	return nil
}

// appendOrWarn records what adopting found. A log that cannot be written
// (a full disk, which a session can cause) does not keep the bus from
// starting: launches, which record their intent first, are then refused.
func (b *bus) appendOrWarn(e LogEvent) {
	if err := b.log.Append(e); err != nil {
		fmt.Fprintf(os.Stderr, "mosaic bus: warning: %v\n", err)
	}
}

// observe follows every session unit's announcements and logs each end.
func (b *bus) observe(unit, iface string, changed map[string]any) {
	name, kind := units.SessionName(unit)
	if name == "" {
		return
	}
	b.mu.Lock()
	p := b.props[unit]
	if p == nil {
		p = map[string]any{}
		b.props[unit] = p
	}
	for k, v := range changed {
		p[k] = v
	}
	state, _ := p["ActiveState"].(string)
	up := state == "active" || state == "activating" || state == "reloading" || state == "deactivating"
	ended := b.running[unit] && (state == "inactive" || state == "failed")
	if up {
		b.running[unit] = true
	}
	var s manager.Session
	if ended {
		s = session.Of(name, kind, p, p)
		delete(b.running, unit)
		delete(b.props, unit)
		// Ownership ends with the session: a later session of the name
		// is not its launcher's.
		for id, c := range b.children {
			if c.name == name && (s.InvocationID == "" || id == s.InvocationID) {
				delete(b.children, id)
			}
		}
	}
	if !up && !ended && iface == "org.freedesktop.systemd1.Unit" && (state == "inactive" || state == "failed") {
		delete(b.props, unit) // a unit that came and went unseen: nothing to keep
	}
	b.mu.Unlock()
	if !ended {
		return
	}
	end := LogEvent{Event: "end", Session: name, Invocation: s.InvocationID, Result: s.Result, ExitStatus: s.ExitStatus, Signal: s.Signal}
	if rec, ok := records.Read(b.paths.SessionDir(name)); ok {
		end.Profile = rec.Profile
	}
	if end.ExitStatus == nil { // a scope, or a unit collected too soon: its own record
		if e, ok := records.ReadEnd(b.paths.SessionDir(name)); ok {
			if s, ok := session.FromRecords(name, b.paths.SessionDir(name)); ok && e.Ended.After(time.Now().Add(-time.Minute)) {
				end.Result, end.ExitStatus, end.Signal = s.Result, s.ExitStatus, s.Signal
			}
		}
	}
	if end.Result == "" {
		end.Result = "success"
	}
	if err := b.log.Append(end); err != nil {
		fmt.Fprintf(os.Stderr, "mosaic bus: %v\n", err)
	}
}
