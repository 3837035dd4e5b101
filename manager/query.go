package manager

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"mosaic/manager/bulkget"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/units/errcode"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"mosaic/sandbox"
	"mosaic/units"
)

// Session is what mosaic reports about one session; systemd is the source
// of every field but the last four, which come from the session's record.
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

	Command          []string       `json:"command,omitempty"`
	Workspace        string         `json:"workspace,omitempty"`
	WorkspaceGivenAs string         `json:"workspace_given_as,omitempty"`
	Binds            []sandbox.Bind `json:"binds,omitempty"`
	Profile          string         `json:"profile,omitempty"`
	Credentials      []string       `json:"credentials,omitempty"` // names; values never leave the env file
	MayLaunch        bool           `json:"may_launch,omitempty"`  // started with --may-launch
	Network          string         `json:"network,omitempty"`     // none, allow or host (not confined)
	AllowHosts       []string       `json:"allow_hosts,omitempty"` // network allow: where the egress proxy lets it go
	Output           string         `json:"output,omitempty"`      // journal (mosaic start) or terminal (mosaic run)

	// The rows of the syscall filter its profile lifted.
	SeccompAllow []string `json:"seccomp_allow,omitempty"`
	Sandbox      string   `json:"sandbox,omitempty"` // bwrap, or landlock (no bwrap: see Confinement)

	// HostExecWritable: started with --allow-write-host-exec.
	HostExecWritable bool `json:"host_exec_writable,omitempty"`
	// HostExecCreated (a running session, status only): the host-executed
	// entries missing at its start that it has created; they are moved
	// aside when it ends, as MovedAside says.
	HostExecCreated []string             `json:"host_exec_created,omitempty"`
	MovedAside      []sandbox.MovedAside `json:"moved_aside,omitempty"`
	// Injected: the credentials the egress proxy puts into requests, with
	// their hosts (the session holds placeholders); the others are in the
	// session's environment.
	Injected map[string][]string `json:"credentials_injected,omitempty"`
	// Problem says what is wrong with a session mosaic cannot fully read
	// (a damaged record); rm removes it.
	Problem     string   `json:"problem,omitempty"`
	Environment []string `json:"environment,omitempty"` // non-secret NAME=VALUE (profile, --env, --pass-env)
}

// Running reports whether the session's unit is up, on its way up, or on
// its way down (its processes are still there).
func (s Session) Running() bool {
	return s.State == "active" || s.State == "activating" || s.State == "reloading" || s.State == "deactivating"
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
	up, sp := unitProps(), serviceProps()
	if len(up) == 0 {
		return Session{}, bug("reading "+unit, errors.New("systemd answered no property"))
	}
	if scope := scopeProps(); up["LoadState"] == "not-found" && scope["LoadState"] != "not-found" && len(scope) > 0 {
		unit, kind, up = units.ScopeName(name), units.KindScope, scope
		sp = m.properties(cctx, unitPath(unit), "org.freedesktop.systemd1.Scope", scopeProperties)()
	}
	if up["LoadState"] == "not-found" {
		// systemd collects a unit that ended cleanly; the session's records
		// still say what it was and how it ended.
		if s, ok := FromRecords(name, mustPaths().SessionDir(name)); ok {
			return s, nil
		}
		return Session{}, errNoSession(name)
	}
	if !isSession(up["Description"]) {
		return Session{}, errNoSession(name)
	}
	s := SessionOf(name, kind, up, sp)
	switch {
	case s.Running() && kind == units.KindService:
		s.PIDs = servicePIDs()
	case s.Running():
		s.PIDs = m.pidsAsync(cctx, unit)()
	}
	if rec, ok := records.Read(mustPaths().SessionDir(name)); ok {
		describe(rec, &s)
		if s.Running() {
			s.HostExecCreated = sandbox.Created(rec.Workspace, rec.HostExecMissing)
		} else if e, ok := records.ReadEnd(mustPaths().SessionDir(name)); ok {
			s.MovedAside = e.MovedAside
		}
	}
	return s, nil
}

// List reports every mosaic session systemd knows, sorted by name. It reads
// systemd only: no state file is consulted to decide what exists.
func (m *Manager) List(ctx context.Context) ([]Session, error) { return m.list(ctx, false) }

// ListInvocations is List with each session's InvocationID, which the bus
// keys ownership by: one more Get per session, which mosaic list does
// without.
func (m *Manager) ListInvocations(ctx context.Context) ([]Session, error) { return m.list(ctx, true) }

func (m *Manager) list(ctx context.Context, invocations bool) ([]Session, error) {
	cctx, cancel := bounded(ctx)
	defer cancel()
	st, err := m.conn.ListUnitsByPatternsContext(cctx, nil, []string{units.UnitPrefix + "*" + units.UnitSuffix, units.UnitPrefix + "*" + units.ScopeSuffix})
	if err != nil {
		return nil, bug("ListUnitsByPatterns", err)
	}
	// Only the properties a list shows, each a Get (a GetAll of a service
	// is some 250 properties), for every session at once, then collected:
	// systemd answers them in a row. They go over a bulk connection (see
	// package bulkget), or one by one over this one where it cannot be made.
	type pending struct {
		name, kind     string
		u              sd.UnitStatus
		iface          string
		props, unitPrp []string
	}
	var all []pending
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
		all = append(all, pending{name, kind, u, iface, props, unitProps})
		for _, n := range props {
			gets = append(gets, bulkget.Get{Path: u.Path, Iface: iface, Name: n})
		}
		for _, n := range unitProps {
			gets = append(gets, bulkget.Get{Path: u.Path, Iface: "org.freedesktop.systemd1.Unit", Name: n})
		}
	}
	values, err := bulkget.Read(cctx, m.addr, m.viaBus, callTimeout, gets)
	if err != nil {
		values = make([]any, 0, len(gets))
		var collect []func() map[string]any
		for _, p := range all {
			collect = append(collect, m.properties(cctx, p.u.Path, p.iface, p.props), m.properties(cctx, p.u.Path, "org.freedesktop.systemd1.Unit", p.unitPrp))
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
	}
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
		out = append(out, SessionOf(p.name, p.kind, up, sp))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
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
var listProperties = []string{"Result", "MainPID", "ExecMainStartTimestamp", "ExecMainExitTimestamp", "ExecMainCode", "ExecMainStatus",
	"MemoryCurrent", "TasksCurrent", "CPUUsageNSec", "MemoryMax", "TasksMax", "CPUQuotaPerSecUSec"}

// runningProperties are listProperties less the main process's exit: what
// List reads of a service whose main process runs (a third fewer calls
// when listing many sessions).
var runningProperties = []string{"Result", "MainPID", "ExecMainStartTimestamp", "MemoryCurrent", "TasksCurrent", "CPUUsageNSec"}

// scopeProperties are the Scope properties sessionOf reads: a scope has no
// main process; mosaic run, its parent, records how it ended.
var scopeProperties = []string{"Result", "MemoryCurrent", "TasksCurrent", "CPUUsageNSec", "MemoryMax", "TasksMax", "CPUQuotaPerSecUSec"}

func isSession(description any) bool {
	d, _ := description.(string)
	return strings.HasPrefix(d, units.DescriptionPrefix)
}

// SessionOf builds a Session from the unit's Unit and Service (or Scope)
// properties.
func SessionOf(name, kind string, up, sp map[string]any) Session {
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
	s.ExitStatus, s.Signal = exitOf(kinds[code], int(status))
	if ts, _ := sp["ExecMainExitTimestamp"].(uint64); ts > 0 && s.ExitStatus != nil {
		t := time.UnixMicro(int64(ts))
		s.Ended = &t
	}
	s.MemoryBytes = counter(sp["MemoryCurrent"])
	s.Tasks = counter(sp["TasksCurrent"])
	s.CPUNSec = counter(sp["CPUUsageNSec"])
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

// mustPaths is UserPaths for readers that can do without it (a missing
// record only means fewer details).
func mustPaths() request.Paths {
	p, _ := request.UserPaths()
	return p
}
