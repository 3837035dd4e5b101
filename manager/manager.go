// Package manager is the one place mosaic talks to systemd: it holds one D-Bus
// connection to the user's service manager and starts, stops, lists, inspects
// and waits for sessions through it (StartTransientUnit, StopUnit, KillUnit,
// ListUnitsByPatterns, and the units' PropertiesChanged signals).
//
// It connects through the user bus where there is one (see Connect), else to
// the manager's private socket, $XDG_RUNTIME_DIR/systemd/private; either
// passes Unix descriptors for mosaic run.
package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"mosaic/internal/errcode"
	"mosaic/manager/request"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"mosaic/sandbox"
	"mosaic/units"
)

// callTimeout bounds every single D-Bus call; systemd answers in
// milliseconds, so a call that takes this long means a wedged manager.
const callTimeout = 10 * time.Second

// Manager is a connection to the user's systemd manager.
type Manager struct {
	conn     systemdClient
	bus      busConn
	closed   <-chan struct{} // closed when the connection is (gone)
	features units.Features
	opts     Options // as given to Connect or Open, MosaicBin filled in
	// paths are the user's, read once where the Manager is made (Connect,
	// Open); pathsErr says why there are none (no home), to the calls that
	// need them.
	paths    request.Paths
	pathsErr error
	// host, when set, is the host this manager's plans are made against
	// (Plan, the finish step's) in place of this one as opts say
	// (hostFor): a test's.
	host *Host

	viaBus  bool   // through dbus-daemon: signals need Subscribe and match rules
	private string // the manager's private socket, which a bulk connection dials
	version string // the manager's Version property

	subscribed sync.Once
	mu         sync.Mutex
	watchers   map[dbus.ObjectPath][]*unitWatch
	signals    chan *dbus.Signal
	onSession  func(unit, iface string, changed map[string]any) // WatchSessions

	sliceLimited bool // limitSlice's work is done (under mu)

	// oneCommand: the connection ends with this one command (a CLI's run
	// or start, made by Open), and dbus-daemon drops its match rules then:
	// none is taken back before (one message each, issue 32).
	oneCommand bool
	onJob      func(*dbus.Signal) // the client's job ends (unitClient.jobRemoved)
	counter    *messageCounter    // this connection's messages
	trace      *tracer            // MOSAIC_TRACE: Close writes the message count
}

// systemdClient is what mosaic calls of systemd's Manager object (the unit
// methods and their jobs' ends; properties and signals go over bus), in
// go-systemd's terms. *unitClient is the one real one; a test's fake
// (fake_test.go) runs the start, claim and scope control flow without
// systemd.
type systemdClient interface {
	ListUnitsByNamesContext(ctx context.Context, units []string) ([]sd.UnitStatus, error)
	ListUnitsByPatternsContext(ctx context.Context, states, patterns []string) ([]sd.UnitStatus, error)
	ResetFailedUnitContext(ctx context.Context, name string) error
	SetUnitPropertiesContext(ctx context.Context, name string, runtime bool, properties ...sd.Property) error
	StartTransientUnitAux(ctx context.Context, name, mode string, properties []sd.Property, aux []sd.PropertyCollection, ch chan<- string) (int, error)
	StopUnitContext(ctx context.Context, name, mode string, ch chan<- string) (int, error)
	KillUnitWithTarget(ctx context.Context, name string, target sd.Who, signal int32) error
	Close()
}

// busConn is what mosaic uses of godbus's Conn (properties, signals, calls
// sent without waiting): *dbus.Conn, or a test's fake.
type busConn interface {
	Object(dest string, path dbus.ObjectPath) dbus.BusObject
	Signal(ch chan<- *dbus.Signal)
	AddMatchSignal(options ...dbus.MatchOption) error
}

// Options are what a caller says of the Manager it connects, given to
// Connect or Open: a Manager is whole when returned, and they hold for
// its life.
type Options struct {
	// MosaicBin is the mosaic binary sessions' broker units run, beside
	// the stage binary their exec shim and init run (Host.StageBin); ""
	// for this process's own executable.
	MosaicBin string
	// Outside, when set, is what sessions' sandbox checks compare against
	// instead of this process's own namespaces and /tmp (a confined bus).
	Outside *sandbox.Outside
	// TieSelf says this process runs at most one Run and then exits (the
	// CLI): a Run then ties its session to this process (runtie.go). A
	// long-lived caller (the bench, a program linking the manager) leaves
	// it false: it would be moved into one scope after another, and a
	// second Run's scope would have the first's name.
	TieSelf bool
	// Paths, when set, are the user's paths as the caller read them
	// (request.UserPaths): a manager's and its plans' paths are then the
	// same as the caller's, and the environment is read for them once. Nil:
	// the manager reads them when it is made.
	Paths *request.Paths
	// Say, when set, is given the lines the manager has for the user as
	// it goes, beside a command's result: an interrupted apply it rolled
	// back. The CLI prints them on stderr; nil says none (the manager
	// never writes to a terminal itself).
	Say func(line string)
}

type address struct {
	addr   string
	viaBus bool
}

// addresses are where to reach the manager, best first: the user bus, then
// the manager's private socket.
func addresses(rt string) []address {
	var a []address
	if bus := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); bus != "" {
		a = append(a, address{bus, true})
	} else if _, err := os.Stat(filepath.Join(rt, "bus")); err == nil {
		a = append(a, address{"unix:path=" + filepath.Join(rt, "bus"), true})
	}
	return append(a, address{privateSocket(rt), false})
}

// privateSocket is the address of the user manager's private socket in the
// runtime directory rt: systemd itself answers there, with no dbus-daemon
// between.
func privateSocket(rt string) string {
	return "unix:path=" + filepath.Join(rt, "systemd", "private")
}

// dialTimeout bounds connecting, authenticating and saying Hello on a bus:
// a dbus-daemon that is stopped (SIGSTOP) or a socket nobody answers accepts
// the connection and then never speaks. The private socket is tried then.
const dialTimeout = 3 * time.Second

// dial connects and authenticates; on a bus it also says Hello. Signals are
// delivered in the order they came (godbus's default handler, once a
// channel is full, delivers from goroutines of their own, out of order).
func dial(ctx context.Context, addr string, viaBus bool, counter *messageCounter) (*dbus.Conn, error) {
	// godbus closes the connection when the context it was dialled with is
	// done: the caller's context bounds the dial, never the connection's
	// life (mosaic start cancels its context on Ctrl-C, then still stops
	// the session over the same connection). The connection's own context
	// ends when it closes, which wakes every waiter.
	// The private socket is the last resort: it gets as long as a call.
	wait := dialTimeout
	if !viaBus {
		wait = callTimeout
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	opts := append([]dbus.ConnOption{dbus.WithContext(context.WithoutCancel(ctx)), dbus.WithSignalHandler(dbus.NewSequentialSignalHandler())}, counter.options()...)
	c, err := dbus.Dial(addr, opts...)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		err := c.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))})
		if err == nil && viaBus {
			err = c.Hello()
		}
		done <- err
	}()
	select {
	case err = <-done:
	case <-deadline.C:
		err = fmt.Errorf("no answer within %s", wait)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		c.Close() // also ends a blocked Auth or Hello
		return nil, err
	}
	return c, nil
}

// subscribe asks systemd, once, to emit its signals (job ends, property
// changes) on the bus; on the private socket it sends them anyway.
//
// It does not wait for the answer (a round trip in which systemd itself
// makes two calls to dbus-daemon to track this client): systemd handles
// one connection's calls in the order they were sent, so it has subscribed
// this client before it handles the next call (StartTransientUnit,
// StopUnit) whose signals the caller waits for. Its error was never acted
// on: a failed Subscribe shows as a missing signal either way.
func (m *Manager) subscribe(ctx context.Context) {
	if m.viaBus {
		m.subscribed.Do(func() {
			m.send("org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager.Subscribe")
		})
	}
}

// send sends a method call and asks for no answer (no reply crosses the
// bus): the message is written to the socket before send returns, so it is
// ordered before every later call on this connection.
func (m *Manager) send(dest string, path dbus.ObjectPath, method string, args ...any) {
	m.bus.Object(dest, path).Go(method, dbus.FlagNoReplyExpected, nil, args...)
}

// Connect opens the connection and reads the manager's version once.
//
// It goes through the user bus (dbus-daemon) where there is one, as
// systemd-run --user does, and only then to the manager's private socket.
// On the private socket systemd sends every signal of every unit to every
// client, unasked: with a hundred mosaic processes at once that is a
// hundred copies of every job and property change, and 100 concurrent
// starts took 12.5 s instead of 1.4 s from one process. On the bus, systemd
// emits each signal once and dbus-daemon delivers it only to the clients
// whose match rules ask for it.
func Connect(ctx context.Context, opts Options) (*Manager, error) {
	m, err := connect(ctx, opts)
	if err != nil {
		return nil, err
	}
	m.paths, m.pathsErr = optionPaths(opts)
	m.sweepCredentials(ctx) // no secret outlives the next mosaic command
	return m, nil
}

// optionPaths are opts' Paths, else the user's paths read from the
// environment (request.UserPaths).
func optionPaths(opts Options) (request.Paths, error) {
	if opts.Paths != nil {
		return *opts.Paths, nil
	}
	return request.UserPaths()
}

// connect is Connect without the sweep of credential files, for a caller
// that sweeps once it knows its request is good (Open).
func connect(ctx context.Context, opts Options) (*Manager, error) {
	rt, err := request.RuntimeDir()
	if err != nil {
		return nil, err
	}
	var m *Manager
	var tried []string
	trace, _ := ctx.Value(traceKey{}).(*tracer)
	for _, a := range addresses(rt) {
		counter := &messageCounter{}
		if trace != nil && trace.messages {
			counter.list = trace.w
		}
		bus, err := dial(ctx, a.addr, a.viaBus, counter)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", a.addr, err))
			continue
		}
		conn := newUnitClient(bus)
		m = &Manager{conn: conn, bus: bus, closed: bus.Context().Done(), viaBus: a.viaBus, private: privateSocket(rt), watchers: map[dbus.ObjectPath][]*unitWatch{}, onJob: conn.jobRemoved, counter: counter, trace: trace}
		m.mu.Lock()
		m.startDispatch() // the job ends' reader, before any call
		m.mu.Unlock()
		// A bus with no systemd on it, or one that answers Hello and then
		// nothing, is passed over for the next address, as a dead one is.
		if err = m.readVersion(ctx, a.viaBus); err == nil {
			break
		}
		conn.Close()
		m = nil
		tried = append(tried, fmt.Sprintf("%s: %v", a.addr, err))
	}
	if m == nil {
		return nil, errcode.NoUserManager.New("cannot reach the systemd user manager (%s): check `systemctl --user status`; on a machine without systemd as PID 1, use contrib/rig.sh", strings.Join(tried, "; "))
	}
	if m.features.Version < 252 {
		m.Close()
		return nil, errcode.SystemdTooOld.New("systemd %q is older than 252, the oldest mosaic supports: upgrade systemd", m.version)
	}
	m.opts = opts
	if m.opts.MosaicBin == "" {
		m.opts.MosaicBin = executable()
	}
	return m, nil
}

// Paths are the user's paths this Manager was made with, or why there
// are none (no home).
func (m *Manager) Paths() (request.Paths, error) { return m.paths, m.pathsErr }

// executable is this process's own binary, resolved.
func executable() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	bin, _ := filepath.EvalSymlinks(exe)
	return bin
}

// Connecting is a connection to systemd still being made: Open starts it
// before the request is checked, so that its round trips (waits) overlap
// the check (work). Manager waits for it; a scope run waits for it only
// where it must (RunScope), and makes its name, state and sandbox
// meanwhile. No Manager exists before its connection does.
type Connecting struct {
	done  chan struct{} // closed once m or err is set
	m     *Manager
	err   error
	swept sync.Once
}

// connectInBackground starts connecting (connect, without the sweep), for
// the user's paths already read.
func connectInBackground(ctx context.Context, opts Options, paths request.Paths) *Connecting {
	c := &Connecting{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.m, c.err = connect(ctx, opts)
		if c.m != nil {
			c.m.oneCommand = true
			c.m.paths = paths
		}
	}()
	return c
}

// Manager waits for the connection and returns its manager, whole; the
// first call also sweeps credential files (see Connect), which Open does
// only once its request is known to be good.
func (c *Connecting) Manager(ctx context.Context) (*Manager, error) {
	<-c.done
	if c.err != nil {
		return nil, c.err
	}
	c.swept.Do(func() { c.m.sweepCredentials(ctx) })
	return c.m, nil
}

// Close closes the connection; one still being made (a scope run
// interrupted meanwhile) is closed once it is there, without waiting.
func (c *Connecting) Close() {
	closeManager := func() {
		if c.m != nil {
			c.m.Close()
		}
	}
	select {
	case <-c.done:
		closeManager()
	default:
		go func() {
			<-c.done
			closeManager()
		}()
	}
}

// readVersion reads the manager's version; through a bus within
// dialTimeout, since the private socket is there to fall back on.
func (m *Manager) readVersion(ctx context.Context, viaBus bool) error {
	if viaBus {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dialTimeout)
		defer cancel()
	}
	var v dbus.Variant
	if err := m.call(ctx, "org.freedesktop.DBus.Properties.Get", "org.freedesktop.systemd1.Manager", "Version").Store(&v); err != nil {
		return fmt.Errorf("cannot read the user manager's version: %w", err)
	}
	m.version, _ = v.Value().(string)
	m.features = units.FeaturesFor(units.ParseVersion(m.version))
	return nil
}

// gone is closed when the connection to systemd is: every wait for an
// announcement also waits on it, so that a lost connection wakes them all.
func (m *Manager) gone() <-chan struct{} { return m.closed }

// Done is closed when the connection to systemd is: a long-lived client
// (the bus) exits then, so that systemd restarts it with a new one.
func (m *Manager) Done() <-chan struct{} { return m.gone() }

// errGone is the error of a wait that the connection's end cut short.
func errGone(what string) error {
	return errcode.SystemdGone.New("%s: the connection to systemd closed: check `systemctl --user status`, then try again", what)
}

// Close closes the connection; under MOSAIC_TRACE it writes how many
// messages the connection sent and received.
func (m *Manager) Close() {
	m.conn.Close()
	if m.trace != nil {
		fmt.Fprintf(m.trace.w, "mosaic trace: dbus messages: %s\n", m.Messages())
	}
}

// Features are what the connected manager supports.
func (m *Manager) Features() units.Features { return m.features }

// ControlGroup is the manager's own control group (its Manager property),
// under which every session's cgroup lies.
func (m *Manager) ControlGroup(ctx context.Context) (string, error) {
	var v dbus.Variant
	if err := m.call(ctx, "org.freedesktop.DBus.Properties.Get", "org.freedesktop.systemd1.Manager", "ControlGroup").Store(&v); err != nil {
		return "", systemdError("reading the manager's ControlGroup", err)
	}
	cg, _ := v.Value().(string)
	return cg, nil
}

// call calls a method on the manager object, bounded by callTimeout.
func (m *Manager) call(ctx context.Context, method string, args ...any) *dbus.Call {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	obj := m.bus.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1")
	return obj.CallWithContext(ctx, method, 0, args...)
}

// bounded bounds one go-systemd call by callTimeout.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, callTimeout)
}

// dbusErrorName returns the D-Bus error name of err, or "".
func dbusErrorName(err error) string {
	var e dbus.Error
	if errors.As(err, &e) {
		return e.Name
	}
	var pe *dbus.Error
	if errors.As(err, &pe) && pe != nil {
		return pe.Name
	}
	return ""
}

const (
	errUnitExists = "org.freedesktop.systemd1.UnitExists"
	errNoSuchUnit = "org.freedesktop.systemd1.NoSuchUnit"
	// errNoUnitForPID: the process is in no unit (systemd's
	// BUS_ERROR_NO_UNIT_FOR_PID).
	errNoUnitForPID = "org.freedesktop.systemd1.NoUnitForPID"
)

// systemdError classifies an error systemd (or the connection to it)
// answered a call with: a missed deadline, a closed connection and a unit
// that is gone each get a code of their own, and what is left is
// systemd-error, an answer mosaic did not expect. Each keeps err as its
// cause.
func systemdError(what string, err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return errcode.SystemdTimeout.Wrap(err, "%s: systemd did not answer within %s: check `systemctl --user status` (a stopped dbus-daemon or a wedged manager)", what, callTimeout)
	case errors.Is(err, dbus.ErrClosed) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return errcode.SystemdGone.Wrap(err, "%s: the connection to systemd closed: check `systemctl --user status`, then try again", what)
	case dbusErrorName(err) == errNoSuchUnit:
		return errcode.NoSuchSession.Wrap(err, "%s: systemd no longer has that unit (the session ended meanwhile): see `mosaic list --all`", what)
	}
	return errcode.SystemdError.New("%s: %w (an answer mosaic did not expect from systemd; please report it with `mosaic doctor` output)", what, err)
}
