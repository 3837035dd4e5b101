package manager

import (
	"context"
	"strconv"
	"sync"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// unitClient is mosaic's own systemdClient on one godbus connection: the
// few Manager methods mosaic calls, and the wait for a job's end.
//
// It replaces go-systemd's Conn, which cost every command a round trip
// and a start's concurrency (issue 32): its NewConnection waits for an
// AddMatch of every job end of every unit (which Connect then took back),
// and its startJob holds one lock across the StartTransientUnit round trip,
// so that from one process (the bus, the bench) starts went one at a time,
// and the job-end dispatcher waited behind them.
type unitClient struct {
	bus *dbus.Conn
	obj dbus.BusObject

	mu sync.Mutex
	// waits are the job waits per unit: JobRemoved names the unit, and a
	// job's end can come in before its call's reply has been read (the
	// reply and the signal go to different goroutines).
	waits map[string][]*jobWait
}

// A jobWait is one caller waiting for the end of the job its call made on
// unit: the job ends seen for the unit until the call's reply named its
// job, then that job's.
type jobWait struct {
	job  dbus.ObjectPath   // the call's job, once its reply is read
	seen map[string]string // job path -> result, before then
	ch   chan<- string
}

// newUnitClient is a client on bus; the Manager's one reader of signals
// hands it the job ends (jobRemoved), in the order systemd sent them with
// the units' property changes: systemd announces a unit's pending changes
// before the end of its job, so a watch has seen them when a job wait
// returns. On the bus, JobRemoved reaches this connection only through a
// match rule (jobsOf); on the private socket systemd sends every signal.
func newUnitClient(bus *dbus.Conn) *unitClient {
	return &unitClient{bus: bus, obj: bus.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1"), waits: map[string][]*jobWait{}}
}

// jobRemovedSignal is the name of systemd's signal of a job's end.
const jobRemovedSignal = "org.freedesktop.systemd1.Manager.JobRemoved"

// jobRemoved hands a JobRemoved (id, job, unit, result) to the waits for
// its unit; any other signal is passed over.
func (c *unitClient) jobRemoved(sig *dbus.Signal) {
	if sig.Name != jobRemovedSignal || len(sig.Body) < 4 {
		return
	}
	job, _ := sig.Body[1].(dbus.ObjectPath)
	unit, _ := sig.Body[2].(string)
	result, _ := sig.Body[3].(string)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range append([]*jobWait(nil), c.waits[unit]...) {
		switch {
		case w.job == job:
			c.deliver(unit, w, result)
		case w.job == "":
			w.seen[string(job)] = result
		}
	}
}

// deliver gives w its result and ends it; c.mu is held. Every caller's
// channel has room for the one result.
func (c *unitClient) deliver(unit string, w *jobWait, result string) {
	select {
	case w.ch <- result:
	default:
	}
	c.remove(unit, w)
}

// remove ends w; c.mu is held.
func (c *unitClient) remove(unit string, w *jobWait) {
	list := c.waits[unit]
	for i, x := range list {
		if x == w {
			c.waits[unit] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(c.waits[unit]) == 0 {
		delete(c.waits, unit)
	}
}

// job calls method, whose reply is a job's path on unit, and, with ch,
// sends that job's result to ch once systemd announces its end. No lock is
// held across the call.
func (c *unitClient) job(ctx context.Context, unit string, ch chan<- string, method string, args ...any) (int, error) {
	w := c.expect(unit, ch)
	var p dbus.ObjectPath
	err := c.obj.CallWithContext(ctx, "org.freedesktop.systemd1.Manager."+method, 0, args...).Store(&p)
	c.replied(unit, w, p, err)
	if err != nil {
		return 0, err
	}
	id, _ := strconv.Atoi(lastElem(p))
	return id, nil
}

// expect starts waiting for a job end of unit, before the call that makes
// the job is sent; nil without ch.
func (c *unitClient) expect(unit string, ch chan<- string) *jobWait {
	if ch == nil {
		return nil
	}
	w := &jobWait{seen: map[string]string{}, ch: ch}
	c.mu.Lock()
	c.waits[unit] = append(c.waits[unit], w)
	c.mu.Unlock()
	return w
}

// replied tells w its call's answer: job, or err (then nothing is sent).
// A job that already ended is delivered now.
func (c *unitClient) replied(unit string, w *jobWait, job dbus.ObjectPath, err error) {
	if w == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch result, ended := w.seen[string(job)]; {
	case err != nil:
		c.remove(unit, w)
	case ended:
		c.deliver(unit, w, result)
	default:
		w.job, w.seen = job, nil
	}
}

// lastElem is what follows an object path's last slash (a job's number).
func lastElem(p dbus.ObjectPath) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return string(p[i+1:])
		}
	}
	return string(p)
}

// StartTransientUnitAux creates and starts a transient unit (and its
// auxiliary units) with the given properties; mode "fail" refuses when the
// unit is already queued for a conflicting job.
func (c *unitClient) StartTransientUnitAux(ctx context.Context, name, mode string, properties []sd.Property, aux []sd.PropertyCollection, ch chan<- string) (int, error) {
	return c.job(ctx, name, ch, "StartTransientUnit", name, mode, properties, aux)
}

// StopUnitContext queues a stop job of the unit and its dependents.
func (c *unitClient) StopUnitContext(ctx context.Context, name, mode string, ch chan<- string) (int, error) {
	return c.job(ctx, name, ch, "StopUnit", name, mode)
}

// KillUnitWithTarget sends signal to the unit's processes (who: main,
// control or all).
func (c *unitClient) KillUnitWithTarget(ctx context.Context, name string, target sd.Who, signal int32) error {
	return c.obj.CallWithContext(ctx, "org.freedesktop.systemd1.Manager.KillUnit", 0, name, string(target), signal).Store()
}

// ResetFailedUnitContext clears a unit's failed state (and lets systemd
// collect it).
func (c *unitClient) ResetFailedUnitContext(ctx context.Context, name string) error {
	return c.obj.CallWithContext(ctx, "org.freedesktop.systemd1.Manager.ResetFailedUnit", 0, name).Store()
}

// SetUnitPropertiesContext sets properties of a unit; runtime: as a drop-in
// under the runtime directory, gone at logout.
func (c *unitClient) SetUnitPropertiesContext(ctx context.Context, name string, runtime bool, properties ...sd.Property) error {
	return c.obj.CallWithContext(ctx, "org.freedesktop.systemd1.Manager.SetUnitProperties", 0, name, runtime, properties).Store()
}

// ListUnitsByNamesContext returns the named units' states, loaded or not
// (an unknown one is not-found).
func (c *unitClient) ListUnitsByNamesContext(ctx context.Context, names []string) ([]sd.UnitStatus, error) {
	return c.listUnits(ctx, "ListUnitsByNames", names)
}

// ListUnitsByPatternsContext returns the loaded units whose names match one
// of patterns and whose state is one of states (nil: any).
func (c *unitClient) ListUnitsByPatternsContext(ctx context.Context, states, patterns []string) ([]sd.UnitStatus, error) {
	if states == nil {
		states = []string{}
	}
	return c.listUnits(ctx, "ListUnitsByPatterns", states, patterns)
}

// listUnits calls a method answering a(ssssssouso), a unit's status each.
func (c *unitClient) listUnits(ctx context.Context, method string, args ...any) ([]sd.UnitStatus, error) {
	var out []sd.UnitStatus
	if err := c.obj.CallWithContext(ctx, "org.freedesktop.systemd1.Manager."+method, 0, args...).Store(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// Close closes the connection, which ends every wait on it.
func (c *unitClient) Close() { c.bus.Close() }
