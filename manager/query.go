package manager

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"mosaic/internal/acceptloop"
	"mosaic/internal/errcode"
	"mosaic/manager/bulkget"
	"mosaic/manager/cgcount"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/manager/session"
	"mosaic/sandbox/egress"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"mosaic/sandbox"
	"mosaic/units"
)

// Session is what mosaic reports about one session (package session).
type Session = session.Session

// errNoSession is the refusal for a name no mosaic session has.
func errNoSession(name string) error {
	return errcode.NoSuchSession.New("there is no mosaic session named %s: see `mosaic list`", name)
}

// Status reports one session, running or ended while systemd still has it.
func (m *Manager) Status(ctx context.Context, name string) (Session, error) {
	if err := units.ValidateName(name); err != nil {
		return Session{}, err
	}
	cctx, cancel := bounded(ctx)
	defer cancel()
	// Only what status shows, each a Get, sent at once: a GetAll of a
	// service is some 250 properties. A session is a service or a scope.
	unitNames := []string{"LoadState", "Description", "ActiveState", "SubState", "ActiveEnterTimestamp", "InvocationID"}
	unit, kind := units.UnitName(name), units.KindService
	unitProps := m.properties(cctx, unitPath(unit), "org.freedesktop.systemd1.Unit", unitNames)
	scopeProps := m.properties(cctx, unitPath(units.ScopeName(name)), "org.freedesktop.systemd1.Unit", unitNames)
	serviceProps := m.properties(cctx, unitPath(unit), "org.freedesktop.systemd1.Service", listProperties)
	// The processes too, in the same batch: a session asked about is
	// mostly a running service, and a call not needed costs less than a
	// round trip after the others.
	servicePIDs := m.pidsAsync(cctx, unit)
	managerProps := func() map[string]any { return nil }
	if cgcount.Unified() {
		managerProps = m.properties(cctx, managerCgroupGet.Path, managerCgroupGet.Iface, []string{managerCgroupGet.Name})
	}
	up, sp := unitProps(), serviceProps()
	managerCgroup, _ := managerProps()[managerCgroupGet.Name].(string)
	if len(up) == 0 {
		return Session{}, systemdError("reading "+unit, errors.New("systemd answered no property"))
	}
	if scope := scopeProps(); up["LoadState"] == "not-found" && scope["LoadState"] != "not-found" && len(scope) > 0 {
		unit, kind, up = units.ScopeName(name), units.KindScope, scope
		sp = m.properties(cctx, unitPath(unit), "org.freedesktop.systemd1.Scope", scopeProperties)()
	}
	// systemd collects a unit that ended cleanly; the session's records
	// still say what it was and how it ended. The Gets are separate calls:
	// a unit collected between them answers LoadState from before and
	// Description from a unit loaded anew, not found, whose description
	// is its name (seen on 257 right after a session ended), so a unit
	// that does not look like a session is looked up in the records too.
	if up["LoadState"] == "not-found" || !isSession(up["Description"]) {
		if s, ok := session.FromRecords(name, m.paths.SessionDir(name)); ok {
			return s, nil
		}
		return Session{}, errNoSession(name)
	}
	s := session.Of(name, kind, up, sp)
	m.complete(ctx, &s, managerCgroup, servicePIDs, nil, "")
	return s, nil
}

// complete fills in what a status shows beyond the unit's properties: the
// counters (under the manager's cgroup), the processes of a running
// session (servicePIDs, already asked for, for a service's), and what its
// records say: rec when the caller holds the record (a start that just
// wrote it, into dir), else the one read from the state directory (dir,
// or the session's when "").
func (m *Manager) complete(ctx context.Context, s *Session, managerCgroup string, servicePIDs func() []uint32, rec *records.Record, dir string) {
	name, kind := s.Name, s.Kind
	counters(s, managerCgroup)
	switch {
	case s.Running() && kind == units.KindService:
		s.PIDs = servicePIDs()
	case s.Running():
		cctx, cancel := bounded(ctx)
		s.PIDs = m.pidsAsync(cctx, s.Unit)()
		cancel()
		s.MainPID = scopeLeader(s.PIDs)
	}
	if dir == "" {
		dir = m.paths.SessionDir(name)
	}
	if rec == nil {
		if r, ok := records.Read(dir); ok {
			rec = &r
		}
	}
	if rec != nil {
		session.Describe(*rec, s)
		s.Clone, _ = records.ReadClone(dir)
		if s.Running() {
			if s.Network == sandbox.NetworkAllow && kind == units.KindService {
				s.EgressDied = m.egressDied(ctx, name)
			}
		} else if e, ok := records.ReadEnd(dir); ok {
			s.EgressDied = e.EgressDied
		}
		if !s.Running() {
			s.Home = session.HomeOf(dir)
			s.EgressRecord = session.EgressRecordOf(dir)
		}
	}
}

// startedStatus is the status of a service whose start job just ended
// done, from what systemd announced of it meanwhile (watch, which systemd
// sent before the job's end) and what its start told systemd (sent: the
// limits): one call (its processes) instead of some twenty Gets at every
// mosaic start (issue 32). A limit the start did not set is read. rec is
// the record the start wrote into spec.StateDir, which is not read back
// (nor the user's paths resolved again to find it).
func (m *Manager) startedStatus(ctx context.Context, spec units.Spec, watch *unitWatch, sent []sd.Property, rec *records.Record) (Session, error) {
	cctx, cancel := bounded(ctx)
	defer cancel()
	unit := spec.Unit()
	pids := m.pidsAsync(cctx, unit)
	managerProps := func() map[string]any { return nil }
	if cgcount.Unified() {
		managerProps = m.properties(cctx, managerCgroupGet.Path, managerCgroupGet.Iface, []string{managerCgroupGet.Name})
	}
	p := watch.snapshot()
	if p["ActiveState"] != "active" {
		// Not announced running (a command that ended at once, a systemd
		// that sent nothing): ask, as for any session.
		pids()
		return m.Status(ctx, spec.Name)
	}
	var unset []string
	for _, n := range []string{"MemoryMax", "TasksMax", "CPUQuotaPerSecUSec"} {
		unset = append(unset, n)
		for _, x := range sent {
			if x.Name == n {
				p[n] = x.Value.Value()
				unset = unset[:len(unset)-1]
				break
			}
		}
	}
	if len(unset) > 0 {
		for k, v := range m.properties(cctx, unitPath(unit), "org.freedesktop.systemd1.Service", unset)() {
			p[k] = v
		}
	}
	managerCgroup, _ := managerProps()[managerCgroupGet.Name].(string)
	s := session.Of(spec.Name, units.KindService, p, p)
	m.complete(ctx, &s, managerCgroup, pids, rec, spec.StateDir)
	return s, nil
}

// List reports every mosaic session systemd knows, sorted by name. It reads
// systemd only: no state file is consulted to decide what exists.
func (m *Manager) List(ctx context.Context) ([]Session, error) { return m.list(ctx, false) }

// ListInvocations is List with each session's InvocationID, which the bus
// keys ownership by: one more Get per session, which mosaic list does
// without.
func (m *Manager) ListInvocations(ctx context.Context) ([]Session, error) { return m.list(ctx, true) }

// list lists the sessions systemd has: their units, then only the
// properties a list shows, each a Get (a GetAll of a service is some 250
// properties), for every session at once, then collected: systemd answers
// them in a row. They go over a bulk connection (see package bulkget) to
// the manager's private socket, where no dbus-daemon relays each call and
// answer (at 200 sessions a list took ~15 ms less than through the bus),
// or one by one over this one where it cannot be made.
func (m *Manager) list(ctx context.Context, invocations bool) ([]Session, error) {
	cctx, cancel := bounded(ctx)
	defer cancel()
	st, err := m.conn.ListUnitsByPatternsContext(cctx, nil, []string{units.UnitPrefix + "*" + units.UnitSuffix, units.UnitPrefix + "*" + units.ScopeSuffix})
	if err != nil {
		return nil, systemdError("ListUnitsByPatterns", err)
	}
	all, gets := listedSessions(st, invocations)
	// The manager's own cgroup, under which the counters are read, last.
	unified := cgcount.Unified()
	if unified {
		gets = append(gets, managerCgroupGet)
	}
	values, err := bulkget.Read(cctx, m.private, dialTimeout, callTimeout, gets)
	if err != nil {
		if values, err = m.readOneByOne(ctx, all, unified, len(gets)); err != nil {
			return nil, err
		}
	}
	cgroup := ""
	if unified {
		cgroup, _ = values[len(values)-1].(string)
	}
	out := sessionsOf(all, values, cgroup, m.paths)
	m.scopeLeaders(cctx, out)
	return out, nil
}

// scopeLeaders fills in the PID of each running scope in list: a scope has
// no MainPID, so its leader is read from its processes, one call per
// running scope (interactive sessions, few), all sent at once.
func (m *Manager) scopeLeaders(ctx context.Context, list []Session) {
	leaders := map[int]func() []uint32{}
	for i, s := range list {
		if s.Kind == units.KindScope && s.Running() {
			leaders[i] = m.pidsAsync(ctx, s.Unit)
		}
	}
	for i, pids := range leaders {
		list[i].MainPID = scopeLeader(pids())
	}
}

// listed is one session's unit in a list, and the properties read of it.
type listed struct {
	name, kind     string
	u              sd.UnitStatus
	iface          string
	props, unitPrp []string
}

// listedSessions picks the sessions among units, with the Gets of what a
// list shows of each (and its InvocationID, with invocations).
func listedSessions(st []sd.UnitStatus, invocations bool) ([]listed, []bulkget.Get) {
	var all []listed
	var gets []bulkget.Get
	for _, u := range st {
		name, kind := units.SessionName(u.Name)
		if name == "" || !isSession(u.Description) || u.LoadState == "not-found" {
			continue
		}
		iface, props := "org.freedesktop.systemd1.Service", listProperties
		switch {
		case kind == units.KindScope:
			iface, props = "org.freedesktop.systemd1.Scope", scopeProperties
		case u.ActiveState == "active" && u.SubState == "running":
			// The main process runs: it has no exit to read yet.
			props = runningProperties
		}
		var unitProps []string
		if invocations {
			unitProps = []string{"InvocationID"}
		}
		if kind == units.KindScope {
			// A scope's start is its unit's (it has no ExecMain*).
			unitProps = append(unitProps, "ActiveEnterTimestamp")
		}
		all = append(all, listed{name, kind, u, iface, props, unitProps})
		for _, n := range props {
			gets = append(gets, bulkget.Get{Path: u.Path, Iface: iface, Name: n})
		}
		for _, n := range unitProps {
			gets = append(gets, bulkget.Get{Path: u.Path, Iface: "org.freedesktop.systemd1.Unit", Name: n})
		}
	}
	return all, gets
}

// readOneByOne reads what the bulk read could not (n values, in its
// order) one Get at a time over this connection, with a deadline of its
// own: the bulk read may have spent the caller's (a private socket that
// takes the connection and never answers), and a Get that fails leaves
// its session out.
func (m *Manager) readOneByOne(ctx context.Context, all []listed, unified bool, n int) ([]any, error) {
	fctx, fcancel := bounded(ctx)
	defer fcancel()
	values := make([]any, 0, n)
	var collect []func() map[string]any
	for _, p := range all {
		collect = append(collect, m.properties(fctx, p.u.Path, p.iface, p.props), m.properties(fctx, p.u.Path, "org.freedesktop.systemd1.Unit", p.unitPrp))
	}
	var root func() map[string]any
	if unified {
		root = m.properties(fctx, managerCgroupGet.Path, managerCgroupGet.Iface, []string{managerCgroupGet.Name})
	}
	for i, p := range all {
		sp, up := collect[2*i](), collect[2*i+1]()
		for _, n := range p.props {
			values = append(values, sp[n])
		}
		for _, n := range p.unitPrp {
			values = append(values, up[n])
		}
	}
	if unified {
		values = append(values, root()[managerCgroupGet.Name])
	}
	// Sessions whose reads timed out are not gone: an error, not a list
	// without them.
	if fctx.Err() != nil {
		return nil, systemdError("reading the sessions' properties", fctx.Err())
	}
	return values, nil
}

// sessionsOf is the sessions of a list from the values read of them, in
// the order of their Gets, by name; their records are under paths.
func sessionsOf(all []listed, values []any, cgroup string, paths request.Paths) []Session {
	var out []Session
	for _, p := range all {
		sp, up := map[string]any{}, map[string]any{}
		for _, n := range p.props {
			if values[0] != nil {
				sp[n] = values[0]
			}
			values = values[1:]
		}
		for _, n := range p.unitPrp {
			if values[0] != nil {
				up[n] = values[0]
			}
			values = values[1:]
		}
		if len(sp) == 0 {
			continue // gone between the list and the reads
		}
		up["ActiveState"], up["SubState"] = p.u.ActiveState, p.u.SubState
		s := session.Of(p.name, p.kind, up, sp)
		counters(&s, cgroup)
		s.Clone, _ = records.ReadClone(paths.SessionDir(p.name)) // one failed open for a direct session
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// managerCgroupGet reads the user manager's cgroup, under which its units
// are (cgcount).
var managerCgroupGet = bulkget.Get{Path: "/org/freedesktop/systemd1", Iface: "org.freedesktop.systemd1.Manager", Name: "ControlGroup"}

// counters fills in s's cgroup counters, read from the cgroup filesystem
// under the manager's cgroup ("" where the hierarchy is not unified or
// systemd did not say: none).
func counters(s *Session, managerCgroup string) {
	if managerCgroup == "" || !s.Running() {
		return
	}
	c := cgcount.Read(cgcount.Mount, managerCgroup, units.Slice, s.Unit)
	s.MemoryBytes, s.Tasks, s.CPUNSec = c.MemoryBytes, c.Tasks, c.CPUNSec
}

// properties asks for the named properties of one interface of a unit
// object, every request sent at once, and returns the function that collects
// the answers: several of them in flight share the round trips.
func (m *Manager) properties(ctx context.Context, path dbus.ObjectPath, iface string, names []string) func() map[string]any {
	obj := m.bus.Object("org.freedesktop.systemd1", path)
	calls := make([]*dbus.Call, len(names))
	for i, n := range names {
		calls[i] = obj.GoWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, make(chan *dbus.Call, 1), iface, n)
	}
	return func() map[string]any {
		out := make(map[string]any, len(names))
		for i, c := range calls {
			<-c.Done
			var v dbus.Variant
			if c.Store(&v) == nil {
				out[names[i]] = v.Value()
			}
		}
		return out
	}
}

// listProperties are the Service properties sessionOf reads.
// (The counters, MemoryCurrent, TasksCurrent and CPUUsageNSec, are read from
// the cgroup filesystem instead: see counters.)
var listProperties = []string{"Result", "MainPID", "ExecMainStartTimestamp", "ExecMainExitTimestamp", "ExecMainCode", "ExecMainStatus",
	"MemoryMax", "TasksMax", "CPUQuotaPerSecUSec"}

// runningProperties are listProperties less the main process's exit: what
// List reads of a service whose main process runs (a third fewer calls
// when listing many sessions).
var runningProperties = []string{"Result", "MainPID", "ExecMainStartTimestamp"}

// scopeProperties are the Scope properties sessionOf reads: a scope has no
// main process; mosaic run, its parent, records how it ended.
var scopeProperties = []string{"Result", "MemoryMax", "TasksMax", "CPUQuotaPerSecUSec"}

func isSession(description any) bool {
	d, _ := description.(string)
	return strings.HasPrefix(d, units.DescriptionPrefix)
}

// pidsAsync asks for the processes in the unit's cgroup (GetUnitProcesses)
// and returns the function that collects the answer.
func (m *Manager) pidsAsync(ctx context.Context, unit string) func() []uint32 {
	call := m.bus.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1").GoWithContext(ctx,
		"org.freedesktop.systemd1.Manager.GetUnitProcesses", 0, make(chan *dbus.Call, 1), unit)
	return func() []uint32 {
		<-call.Done
		var procs []struct {
			Cgroup  string
			PID     uint32
			Cmdline string
		}
		if err := call.Store(&procs); err != nil {
			return nil
		}
		out := make([]uint32, 0, len(procs))
		for _, p := range procs {
			out = append(out, p.PID)
		}
		return out
	}
}

// scopeLeader is the process of a scope whose parent is outside it (a
// session's init: mosaic's bwrap, which started it, stays outside the
// scope), or 0. Of several (none should be), the first.
func scopeLeader(pids []uint32) uint32 {
	in := make(map[int]bool, len(pids))
	for _, p := range pids {
		in[int(p)] = true
	}
	for _, p := range pids {
		if ppid := parentOf(int(p)); ppid > 0 && !in[ppid] {
			return p
		}
	}
	return 0
}

// parentOf is pid's parent as /proc/PID/stat says, or 0.
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// egressDied reports whether running session name's egress proxy died: it
// started and its process is gone (egress.AliveFile: it may not have
// started yet, as it starts on the session's first connection), or, for a
// proxy of a mosaic before that mark, its unit is down.
func (m *Manager) egressDied(ctx context.Context, name string) bool {
	started, running := acceptloop.Alive(filepath.Join(m.paths.EgressDir(name), egress.AliveFile))
	if started {
		return !running
	}
	return !m.unitRunning(ctx, units.EgressSocketUnitName(name)) && !m.unitRunning(ctx, units.EgressUnitName(name))
}
