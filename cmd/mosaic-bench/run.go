package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"mosaic/manager"
	"mosaic/manager/request"
	"mosaic/sandbox"
	"mosaic/units"
)

// bench holds what every measurement needs.
type bench struct {
	mosaic string // the mosaic binary under test
	ws     string // a workspace under the home
	m      *manager.Manager
	n      int
}

func runAll(args []string) (*Report, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	mosaicBin := fs.String("mosaic", "bin/mosaic", "the mosaic binary")
	srt := fs.String("srt", "", "sandbox-runtime's srt, when installed")
	n := fs.Int("n", 30, "runs per one-shot figure")
	clone := fs.Bool("clone", true, "also measure clone mode (repositories of 1k, 10k, 100k files)")
	onlyClone := fs.Bool("only-clone", false, "measure clone mode only")
	onlyProcesses := fs.Bool("only-processes", false, "count process starts only")
	onlyDevice := fs.Bool("only-device", false, "measure the network device only")
	onlyHome := fs.Bool("only-home", false, "measure the kept home only")
	cloneFiles := fs.Int("clone-files", 0, "measure clone mode only at this many files (1000, 10000 or 100000; 0: all)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(*mosaicBin)
	if err != nil {
		return nil, err
	}
	home, _ := os.UserHomeDir()
	ws, err := os.MkdirTemp(home, "mosaic-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(ws)
	ctx := context.Background()
	// The sessions run the binary under test, not this one.
	m, err := manager.Connect(ctx, manager.Options{MosaicBin: abs})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	b := &bench{mosaic: abs, ws: ws, m: m, n: *n}
	r := &Report{Machine: machine(), Date: time.Now().UTC()}
	if *onlyProcesses {
		b.processStarts(r)
		return r, nil
	}
	if *onlyDevice {
		if err := b.networkDevice(r); err != nil {
			return nil, err
		}
		r.Ratios = deviceRatios(r)
		return r, nil
	}
	if *onlyHome {
		if err := b.keptHome(r); err != nil {
			return nil, err
		}
		r.Ratios = homeRatios(r)
		return r, nil
	}
	if *onlyClone {
		if err := b.cloneMode(ctx, r, *cloneFiles); err != nil {
			return nil, err
		}
		r.Ratios = cloneRatios(r)
		return r, nil
	}
	if err := b.oneShot(r, *srt); err != nil {
		return nil, err
	}
	if err := b.startLatency(r); err != nil {
		return nil, err
	}
	if err := b.concurrency(ctx, r); err != nil {
		return nil, err
	}
	if err := b.breakdown(r); err != nil {
		return nil, err
	}
	b.processStarts(r)
	if err := b.egressTTFB(r); err != nil {
		return nil, err
	}
	if err := b.networkDevice(r); err != nil {
		return nil, err
	}
	if err := b.keptHome(r); err != nil {
		return nil, err
	}
	b.hardening(r)
	if *clone {
		if err := b.cloneMode(ctx, r, *cloneFiles); err != nil {
			return nil, err
		}
	}
	r.Ratios = append(append(append(ratios(r), deviceRatios(r)...), homeRatios(r)...), cloneRatios(r)...)
	return r, nil
}

// equivalent is the systemd-run command line with the properties mosaic
// sends (as -p assignments) and the same ExecStart (exec shim, bwrap argv,
// init): the peer the one-shot target is measured against.
func (b *bench) equivalent(name string, command []string, wait bool) ([]string, error) {
	// A one-shot's session is unnamed, like the mosaic run it is compared
	// with (a named one would save its home at the end); a start's is named,
	// like mosaic start --name.
	// With no network: the default's egress proxy and network device are
	// units and a capability of mosaic's making, which a systemd-run line
	// cannot hold; the mosaic runs and starts it is compared with have
	// --network none too (startNoNetwork), and the default's own cost is
	// its own row (noNetworkName beside mosaic run).
	req := request.Request{Workspace: b.ws, Command: command, Mode: request.ModeDirect, Network: sandbox.NetworkNone}
	if !wait {
		req.Name = name
	}
	plan, err := b.m.Plan(req)
	if err != nil {
		return nil, err
	}
	spec := plan.Spec
	// The directories a start would make that the argv binds.
	dirs := []string{spec.SessionHome(), spec.SessionTmp(), spec.OwnGitDir}
	for _, c := range sandbox.ToolCaches {
		if spec.ToolCache != "" {
			dirs = append(dirs, filepath.Join(spec.ToolCache, c.Name))
		}
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	p := []string{"PrivateUsers=yes", "PrivateTmp=yes", "ProtectSystem=strict",
		"TemporaryFileSystem=" + spec.Home, "TemporaryFileSystem=" + spec.RuntimeDir,
		"BindPaths=" + spec.Workspace, "BindPaths=" + spec.StateDir,
		"NoNewPrivileges=yes", "KillMode=control-group", "Type=notify", "NotifyAccess=all",
		"Slice=" + units.Slice, "WorkingDirectory=" + spec.Workspace, "SyslogIdentifier=" + units.UnitPrefix + name}
	if spec.ToolCache != "" { // the tool caches, bound writable as mosaic binds them
		p = append(p, "BindPaths="+spec.ToolCache)
	}
	for _, ro := range units.ReadOnlyPaths(spec) { // the binds mosaic sends
		p = append(p, "BindReadOnlyPaths="+ro)
	}
	if spec.OwnNetwork() {
		p = append(p, "PrivateNetwork=yes")
	}
	argv := []string{"systemd-run", "--user", "--quiet", "--collect", "--unit", units.UnitName(name) + "-sr"}
	if wait {
		argv = append(argv, "--wait", "--pipe")
	}
	for _, x := range p {
		argv = append(argv, "-p", x)
	}
	return append(argv, units.ExecArgv(spec, units.Launch{})...), nil
}

// handRolled is the service a user would write by hand instead of mosaic
// run (issue 21): systemd-run --wait --pipe with the same sandboxing
// properties and a plain bwrap, but without mosaic's stages (no exec shim,
// no init, no checks, no state, no records).
func (b *bench) handRolled(bwrapArgv []string) []string {
	home, _ := os.UserHomeDir()
	argv := []string{"systemd-run", "--user", "--quiet", "--collect", "--wait", "--pipe", "--slice", units.Slice,
		"-p", "PrivateUsers=yes", "-p", "PrivateTmp=yes", "-p", "ProtectSystem=strict",
		"-p", "TemporaryFileSystem=" + home, "-p", "TemporaryFileSystem=" + os.Getenv("XDG_RUNTIME_DIR"),
		"-p", "BindPaths=" + b.ws, "-p", "NoNewPrivileges=yes", "-p", "PrivateNetwork=yes"}
	return append(argv, bwrapArgv...)
}

// plainBwrap is the plain bwrap both peers run, around /usr/bin/true:
// user, PID and IPC namespaces, the system read-only, the workspace, a
// home and a /tmp of its own.
func (b *bench) plainBwrap() []string {
	home, _ := os.UserHomeDir()
	return []string{"bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session",
		"--cap-drop", "ALL", "--as-pid-1", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc", "--symlink", "usr/bin", "/bin",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--dev", "/dev", "--proc", "/proc",
		"--tmpfs", "/tmp", "--tmpfs", home, "--bind", b.ws, b.ws, "--chdir", b.ws, "--", "/usr/bin/true"}
}

func (b *bench) oneShot(r *Report, srt string) error {
	progress("one-shot: a confined /usr/bin/true, %d runs each", b.n)
	bwrapArgv := b.plainBwrap()
	eq, err := b.equivalent("bench-sr", []string{"/usr/bin/true"}, true)
	if err != nil {
		return err
	}
	cases := []struct {
		name string
		argv []string
	}{
		{"plain exec", []string{"/usr/bin/true"}},
		{"bwrap alone", bwrapArgv},
		{"systemd-run --user --wait --pipe", []string{"systemd-run", "--user", "--quiet", "--wait", "--pipe", "/usr/bin/true"}},
		{"systemd-run, same properties and bwrap argv", eq},
		{handRolledName, b.handRolled(bwrapArgv)},
		{"mosaic run", []string{b.mosaic, "run", "--direct", "--workspace", b.ws, "--", "/usr/bin/true"}},
		// The default (an egress proxy that allows nothing yet) beside the
		// session with no network and no proxy, the default before issue 39.
		{noNetworkName, []string{b.mosaic, "run", "--direct", "--network", "none", "--workspace", b.ws, "--", "/usr/bin/true"}},
		{scopePeerName, append([]string{"systemd-run", "--user", "--quiet", "--scope", "--slice", units.Slice}, bwrapArgv...)},
		{"mosaic run --scope", []string{b.mosaic, "run", "--scope", "--direct", "--workspace", b.ws, "--", "/usr/bin/true"}},
	}
	shown := func(argv []string) string {
		r := strings.NewReplacer(b.mosaic, "mosaic", b.ws, "$WS")
		if srt != "" {
			r = strings.NewReplacer(b.mosaic, "mosaic", b.ws, "$WS", srt+" ", "srt ")
		}
		return r.Replace(shortCommand(argv))
	}
	// Burst: each command 30 times back to back, as a loop would run them.
	for _, c := range cases {
		s, err := measure(c.name, shown(c.argv), b.n, func() error { return runCmd(c.argv) })
		if err != nil {
			return err
		}
		r.OneShot = append(r.OneShot, s)
	}
	// One at a time: the ones the targets compare, in turn, each after
	// a pause, as an agent's tool calls come (see "the cgroup move" in the
	// findings: back to back, a command that ends sooner starts its next
	// one inside the kernel's window that makes the next move cheap).
	progress("one-shot, one at a time: %d runs each, interleaved, %v apart", b.n, spacedPause)
	var spaced []struct {
		name string
		argv []string
	}
	for _, c := range cases {
		switch c.name {
		case handRolledName, "mosaic run", noNetworkName, scopePeerName, "mosaic run --scope":
			spaced = append(spaced, c)
		}
	}
	// srt among them (issue 32: at least 10x slower than mosaic run), once
	// it is seen to run here.
	if srt != "" {
		if err := runCmd([]string{srt, "true"}); err != nil {
			r.Notes = append(r.Notes, "srt could not run here: "+firstLine(err.Error()))
		} else {
			spaced = append(spaced, struct {
				name string
				argv []string
			}{srtName, []string{srt, "true"}})
		}
	}
	ds := make([][]float64, len(spaced))
	for i := 0; i <= b.n; i++ { // the first round warms up
		for j, c := range spaced {
			time.Sleep(spacedPause)
			t := time.Now()
			if err := runCmd(c.argv); err != nil {
				return err
			}
			if i > 0 {
				ds[j] = append(ds[j], ms(time.Since(t)))
			}
		}
	}
	for j, c := range spaced {
		r.Spaced = append(r.Spaced, summarise(c.name, shown(c.argv), ds[j]))
	}
	return nil
}

// spacedPause is the idle time before each run of the one-at-a-time
// figures.
const spacedPause = 250 * time.Millisecond

// startLatency: from the command until the session runs (start returns),
// mosaic start and its systemd-run equivalent in turn, each after a pause.
// The sessions are stopped after the series, outside the timing; then one
// more mosaic start is traced for its D-Bus messages.
func (b *bench) startLatency(r *Report) error {
	progress("start latency: %d starts each, interleaved", b.n)
	var started, srUnits []string
	defer func() {
		_ = parallel(len(started), func(i int) error { stopQuietly(b.mosaic, started[i]); return nil })
		_ = runCmd(append([]string{"systemctl", "--user", "stop"}, srUnits...))
	}()
	var mosaicMs, srMs []float64
	for i := 0; i <= b.n; i++ { // the first round warms up
		name := fmt.Sprintf("bench-start-%d", i)
		srName := fmt.Sprintf("bench-sr-start-%d", i)
		argv, err := b.equivalent(srName, []string{"sleep", "600"}, false)
		if err != nil {
			return err
		}
		time.Sleep(spacedPause)
		started = append(started, name)
		t := time.Now()
		if err := runCmd(append([]string{b.mosaic, "start"}, append(startNoNetwork, "--name", name, "--workspace", b.ws, "--", "sleep", "600")...)); err != nil {
			return err
		}
		d := ms(time.Since(t))
		time.Sleep(spacedPause)
		srUnits = append(srUnits, units.UnitName(srName)+"-sr")
		t = time.Now()
		if err := runCmd(argv); err != nil {
			return err
		}
		if i > 0 {
			mosaicMs, srMs = append(mosaicMs, d), append(srMs, ms(time.Since(t)))
		}
	}
	r.Start = append(r.Start, summarise("mosaic start", "mosaic start --network none --name NAME -- sleep 600", mosaicMs),
		summarise(startPeerName, "systemd-run --user -p … (returns at READY)", srMs))
	name := "bench-start-traced"
	started = append(started, name)
	n, err := messagesOf(b.mosaic, "start", "--direct", "--name", name, "--workspace", b.ws, "--", "sleep", "600")
	if err != nil {
		return err
	}
	r.Messages = append(r.Messages, MessageCount{"mosaic start", n})
	return nil
}

// messagesOf runs mosaic with MOSAIC_TRACE=1 and returns the D-Bus messages
// its last trace line counts.
func messagesOf(mosaic string, args ...string) (manager.Messages, error) {
	cmd := exec.Command(mosaic, args...)
	cmd.Env = append(os.Environ(), "MOSAIC_TRACE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return manager.Messages{}, fmt.Errorf("mosaic %s: %w: %s", args[0], err, out)
	}
	return parseMessages(string(out)), nil
}

// messagesLine starts the trace line of a connection's D-Bus messages.
const messagesLine = "mosaic trace: dbus messages: "

// parseMessages reads the last messages line of a trace.
func parseMessages(out string) manager.Messages {
	var n manager.Messages
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, messagesLine); ok {
			fmt.Sscanf(rest, "%d calls, %d sent without reply, %d replies, %d signals", &n.Calls, &n.NoReply, &n.Replies, &n.Signals)
		}
	}
	return n
}

func stopQuietly(mosaic, name string) {
	exec.Command(mosaic, "stop", "--timeout", "2s", name).Run()
	exec.Command(mosaic, "rm", name).Run()
}

// The rows of the concurrency targets.
const (
	oneProcessName = "100 starts from one process (one connection), until all active"
	manyName       = "100 `mosaic start` processes at once, until all active"
	peerManyName   = "100 systemd-run processes at once, same properties and bwrap argv, until all active"
)

// concurrency: 100 sessions started at once from one process and from 100
// processes (and, beside them, 100 systemd-run equivalents), list at 100 and 200, stopping all, and the memory per session.
func (b *bench) concurrency(ctx context.Context, r *Report) error {
	const batch = 100
	progress("concurrency: %d starts from one process", batch)
	names := func(prefix string) []string {
		var n []string
		for i := 0; i < batch; i++ {
			n = append(n, fmt.Sprintf("%s-%03d", prefix, i))
		}
		return n
	}
	one, many := names("bench-one"), names("bench-many")
	plans := make([]manager.Plan, batch)
	for i, name := range one {
		p, err := b.m.Plan(request.Request{Name: name, Workspace: b.ws, Command: []string{"sleep", "600"}, Mode: request.ModeDirect, Network: sandbox.NetworkNone})
		if err != nil {
			return err
		}
		plans[i] = p
	}
	before := b.m.Messages()
	t := time.Now()
	if err := parallel(batch, func(i int) error { _, err := b.m.Start(ctx, plans[i]); return err }); err != nil {
		return err
	}
	d := ms(time.Since(t))
	r.Concurrency = append(r.Concurrency, Stat{Name: oneProcessName, N: 1, MeanMs: d, MedianMs: d, MinMs: d, MaxMs: d})
	after := b.m.Messages()
	r.Messages = append(r.Messages, MessageCount{"one of 100 starts from one process (per start)", manager.Messages{
		Calls: (after.Calls - before.Calls) / batch, NoReply: (after.NoReply - before.NoReply) / batch,
		Replies: (after.Replies - before.Replies) / batch, Signals: (after.Signals - before.Signals) / batch}})
	if err := b.list(r, "mosaic list at 100 sessions"); err != nil {
		return err
	}

	progress("concurrency: %d starts from %d processes", batch, batch)
	t = time.Now()
	if err := parallel(batch, func(i int) error {
		return runCmd(append([]string{b.mosaic, "start"}, append(startNoNetwork, "--name", many[i], "--workspace", b.ws, "--", "sleep", "600")...))
	}); err != nil {
		return err
	}
	d = ms(time.Since(t))
	r.Concurrency = append(r.Concurrency, Stat{Name: manyName, N: 1, MeanMs: d, MedianMs: d, MinMs: d, MaxMs: d})

	if err := b.peerMany(r, batch); err != nil {
		return err
	}

	if err := b.list(r, "mosaic list at 200 sessions"); err != nil {
		return err
	}

	progress("footprint of idle sessions")
	r.Footprint = b.footprint(ctx, one[:50])

	progress("stopping %d sessions", 2*batch)
	all := append(append([]string{}, one...), many...)
	t = time.Now()
	if err := parallel(len(all), func(i int) error {
		_, err := b.m.Stop(ctx, all[i], 5*time.Second, nil)
		return err
	}); err != nil {
		return err
	}
	d = ms(time.Since(t))
	r.Concurrency = append(r.Concurrency, Stat{Name: "stopping 200 sessions from one process, until all down", N: 1, MeanMs: d, MedianMs: d, MinMs: d, MaxMs: d})
	for _, name := range all {
		_ = b.m.Remove(ctx, name, true)
	}
	return nil
}

// peerMany is concurrency's peer: batch systemd-run processes at once
// with the same properties and ExecStart, each returning at READY, as
// mosaic start does. Its time is what this machine's user manager takes
// for that many such units, whoever asks; they are stopped after.
func (b *bench) peerMany(r *Report, batch int) error {
	progress("concurrency: %d systemd-run equivalents from %d processes", batch, batch)
	peers := make([][]string, batch)
	var peerUnits []string
	for i := range peers {
		name := fmt.Sprintf("bench-srmany-%03d", i)
		argv, err := b.equivalent(name, []string{"sleep", "600"}, false)
		if err != nil {
			return err
		}
		peers[i] = argv
		peerUnits = append(peerUnits, units.UnitName(name)+"-sr")
	}
	t := time.Now()
	err := parallel(batch, func(i int) error { return runCmd(peers[i]) })
	d := ms(time.Since(t))
	r.Concurrency = append(r.Concurrency, Stat{Name: peerManyName, N: 1, MeanMs: d, MedianMs: d, MinMs: d, MaxMs: d})
	_ = runCmd(append([]string{"systemctl", "--user", "stop"}, peerUnits...))
	return err
}

func (b *bench) list(r *Report, label string) error {
	progress("%s", label)
	s, err := measure(label, "mosaic list --json", 10, func() error { return runCmd([]string{b.mosaic, "list", "--json"}) })
	if err == nil {
		r.Concurrency = append(r.Concurrency, s)
	}
	return err
}

// parallel runs f(0..n-1) at once and returns the first error.
func parallel(n int, f func(int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := f(i); err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// footprint is the memory a session costs beyond its command: the PSS of
// bwrap's monitor and mosaic's init, averaged over idle sessions (PSS shares
// the pages of the binaries they have in common fairly among them).
func (b *bench) footprint(ctx context.Context, names []string) map[string]float64 {
	var pss, rss float64
	count := 0
	for _, name := range names {
		s, err := b.m.Status(ctx, name)
		if err != nil {
			continue
		}
		count++
		for _, pid := range s.PIDs {
			comm := output("cat", fmt.Sprintf("/proc/%d/comm", pid))
			if comm == "sleep" {
				continue // the command itself
			}
			p, r := memOf(int(pid))
			pss += p
			rss += r
		}
	}
	if count == 0 {
		return nil
	}
	return map[string]float64{"sessions": float64(count), "pss_per_session": pss / float64(count) / 1024, "rss_per_session": rss / float64(count) / 1024}
}

// memOf reads a process's Pss and Rss in KiB.
func memOf(pid int) (pss, rss float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 {
			var v float64
			fmt.Sscan(f[1], &v)
			switch f[0] {
			case "Pss:":
				pss = v
			case "Rss:":
				rss = v
			}
		}
	}
	return pss, rss
}

// The peers the one-shot goals are measured against (issue 21).
const (
	handRolledName = "systemd-run --wait --pipe, hand-rolled: the properties + plain bwrap, no shim, no init"
	scopePeerName  = "systemd-run --user --scope + bwrap"
	srtName        = "srt (sandbox-runtime)"
	startPeerName  = "systemd-run, same properties and bwrap argv"
)

// noNetworkName is the one-shot run with --network none: no egress proxy.
const noNetworkName = "mosaic run --network none"

// startNoNetwork are the flags of the starts measured against systemd-run
// equivalents (equivalent: no network), and of those measured beside them.
var startNoNetwork = []string{"--direct", "--network", "none"}

// processStarts counts the programs a run, a scope run and their peers
// start (see processStarts); where they cannot be counted, a note says why.
func (b *bench) processStarts(r *Report) {
	progress("process starts of a run, a scope run and their peers")
	bwrapArgv := b.plainBwrap()
	for _, c := range []struct {
		what string
		argv []string
	}{
		{"mosaic run", []string{b.mosaic, "run", "--direct", "--workspace", b.ws, "--", "/usr/bin/true"}},
		{handRolledName, b.handRolled(bwrapArgv)},
		{"mosaic run --scope", []string{b.mosaic, "run", "--scope", "--direct", "--workspace", b.ws, "--", "/usr/bin/true"}},
		{scopePeerName, append([]string{"systemd-run", "--user", "--quiet", "--scope", "--slice", units.Slice}, bwrapArgv...)},
	} {
		_ = runCmd(c.argv) // warm: the bwrap probe's cache, the page cache
		pc, err := processStarts(c.what, c.argv)
		if err != nil {
			r.Notes = append(r.Notes, "process starts not counted: "+firstLine(err.Error()))
			return
		}
		r.Processes = append(r.Processes, pc)
	}
}

// breakdown averages MOSAIC_TRACE's steps over runs of mosaic run and of
// mosaic run --scope.
func (b *bench) breakdown(r *Report) error {
	progress("where the time of mosaic run goes")
	var err error
	var n manager.Messages
	if r.Breakdown, n, err = b.trace(); err != nil {
		return err
	}
	r.Messages = append(r.Messages, MessageCount{"mosaic run", n})
	r.ScopeBreakdown, n, err = b.trace("--scope")
	r.Messages = append(r.Messages, MessageCount{"mosaic run --scope", n})
	return err
}

// trace runs mosaic run with flags n times under MOSAIC_TRACE=1 and returns
// the median of each step and the last run's D-Bus messages.
func (b *bench) trace(flags ...string) ([]Stat, manager.Messages, error) {
	var messages manager.Messages
	steps := map[string][]float64{}
	var order []string
	for i := 0; i < b.n; i++ {
		argv := append(append([]string{"run", "--direct"}, flags...), "--workspace", b.ws, "--", "/usr/bin/true")
		cmd := exec.Command(b.mosaic, argv...)
		cmd.Env = append(os.Environ(), "MOSAIC_TRACE=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return nil, messages, fmt.Errorf("mosaic run: %w: %s", err, out)
		}
		messages = parseMessages(string(out))
		for _, l := range strings.Split(string(out), "\n") {
			rest, ok := strings.CutPrefix(l, "mosaic trace: ")
			if !ok || strings.HasPrefix(l, messagesLine) {
				continue
			}
			f := strings.Fields(rest)
			if len(f) < 3 {
				continue
			}
			step := strings.Join(f[:len(f)-2], " ")
			var v float64
			fmt.Sscan(f[len(f)-2], &v)
			if _, seen := steps[step]; !seen {
				order = append(order, step)
			}
			steps[step] = append(steps[step], v)
		}
	}
	var out []Stat
	for _, step := range order {
		out = append(out, summarise(step, "", steps[step]))
	}
	return out, messages, nil
}

// ratios are issue 32's targets, each from medians of the same run: the
// one-shot ones from the interleaved figures (one at a time), the back to
// back ones beside them for comparison.
func ratios(r *Report) []Ratio {
	get := func(list []Stat, name string) float64 {
		for _, s := range list {
			if s.Name == name {
				return s.MedianMs
			}
		}
		return 0
	}
	var out []Ratio
	if m, hr := get(r.Spaced, "mosaic run"), get(r.Spaced, handRolledName); m > 0 && hr > 0 {
		out = append(out, atMost("one-shot: mosaic run / hand-rolled systemd-run service + plain bwrap", m/hr, 1.15, ""))
	}
	// The peer runs bwrap alone: no init, no checks, no state.
	if sc, p := get(r.Spaced, "mosaic run --scope"), get(r.Spaced, scopePeerName); sc > 0 && p > 0 {
		out = append(out, atMost("one-shot: mosaic run --scope / systemd-run --user --scope + plain bwrap", sc/p, 1.3, ""))
	}
	if srt, m := get(r.Spaced, srtName), get(r.Spaced, "mosaic run"); srt > 0 && m > 0 {
		out = append(out, atLeast("one-shot: srt / mosaic run", srt/m, 10))
	}
	if st, sr := get(r.Start, "mosaic start"), get(r.Start, startPeerName); st > 0 && sr > 0 {
		out = append(out, atMost("start: mosaic start / systemd-run equivalent (returns at READY)", st/sr, 1.0, ""))
	}
	if many, peer := get(r.Concurrency, manyName), get(r.Concurrency, peerManyName); many > 0 && peer > 0 {
		out = append(out, atMost("100 `mosaic start` processes at once / 100 systemd-run equivalents at once", many/peer, 0.3, ""))
	}
	if one := get(r.Concurrency, oneProcessName); one > 0 {
		out = append(out, atMost(oneProcessName+" (s)", one/1000, 3, " s"))
	}
	// Beside them, for comparison (no target): back to back.
	if m, hr := get(r.OneShot, "mosaic run"), get(r.OneShot, handRolledName); m > 0 && hr > 0 {
		out = append(out, Ratio{"back to back: mosaic run / hand-rolled service + plain bwrap", m / hr, "—", true, ""})
	}
	if sc, p := get(r.OneShot, "mosaic run --scope"), get(r.OneShot, scopePeerName); sc > 0 && p > 0 {
		out = append(out, Ratio{"back to back: mosaic run --scope / systemd-run --scope + plain bwrap", sc / p, "—", true, ""})
	}
	if m, sr := get(r.OneShot, noNetworkName), get(r.OneShot, startPeerName); m > 0 && sr > 0 {
		out = append(out, Ratio{"back to back: mosaic run --network none / systemd-run with the same properties and argv", m / sr, "—", true, ""})
	}
	if l := get(r.Concurrency, "mosaic list at 200 sessions"); l > 0 {
		out = append(out, atMost("mosaic list at 200 sessions (ms)", l, 40, " ms"))
	}
	if f := r.Footprint["pss_per_session"]; f > 0 {
		out = append(out, atMost("memory per idle session beyond its command (MiB, PSS)", f, 3, " MiB"))
	}
	return out
}

func shortCommand(argv []string) string {
	s := strings.Join(argv, " ")
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
