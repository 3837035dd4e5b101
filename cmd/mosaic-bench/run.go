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
	m, err := manager.Connect(ctx)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	m.MosaicBin = abs // the sessions run the binary under test, not this one
	b := &bench{mosaic: abs, ws: ws, m: m, n: *n}
	r := &Report{Machine: machine(), Date: time.Now().UTC()}
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
	if err := b.egressTTFB(r); err != nil {
		return nil, err
	}
	b.hardening(r)
	if *clone {
		if err := b.cloneMode(ctx, r, *cloneFiles); err != nil {
			return nil, err
		}
	}
	r.Ratios = append(ratios(r), cloneRatios(r)...)
	return r, nil
}

// equivalent is the systemd-run command line with the properties mosaic
// sends (as -p assignments) and the same ExecStart (exec shim, bwrap argv,
// init): the peer the one-shot target is measured against.
func (b *bench) equivalent(name string, command []string, wait bool) ([]string, error) {
	plan, err := b.m.Plan(request.Request{Name: name, Workspace: b.ws, Command: command})
	if err != nil {
		return nil, err
	}
	spec := plan.Spec
	for _, d := range []string{spec.SessionHome(), spec.SessionTmp()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	p := []string{"PrivateUsers=yes", "PrivateTmp=yes", "ProtectSystem=strict",
		"TemporaryFileSystem=" + spec.Home, "TemporaryFileSystem=" + spec.RuntimeDir,
		"BindPaths=" + spec.Workspace, "BindPaths=" + spec.StateDir,
		"BindReadOnlyPaths=" + spec.StageBin, "BindReadOnlyPaths=" + spec.BwrapBin,
		"BindReadOnlyPaths=" + filepath.Join(spec.RuntimeDir, "systemd", "notify"),
		"NoNewPrivileges=yes", "KillMode=control-group", "Type=notify", "NotifyAccess=all",
		"Slice=" + units.Slice, "WorkingDirectory=" + spec.Workspace, "SyslogIdentifier=" + units.UnitPrefix + name}
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
	return append(argv, units.ExecArgv(spec)...), nil
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

func (b *bench) oneShot(r *Report, srt string) error {
	progress("one-shot: a confined /usr/bin/true, %d runs each", b.n)
	// The plain bwrap both peers run: user, PID and IPC namespaces, the
	// system read-only, the workspace, a home and a /tmp of its own.
	home, _ := os.UserHomeDir()
	bwrapArgv := []string{"bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session",
		"--cap-drop", "ALL", "--as-pid-1", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc", "--symlink", "usr/bin", "/bin",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--dev", "/dev", "--proc", "/proc",
		"--tmpfs", "/tmp", "--tmpfs", home, "--bind", b.ws, b.ws, "--chdir", b.ws, "--", "/usr/bin/true"}
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
		{"mosaic run", []string{b.mosaic, "run", "--workspace", b.ws, "--", "/usr/bin/true"}},
		{scopePeerName, append([]string{"systemd-run", "--user", "--quiet", "--scope", "--slice", units.Slice}, bwrapArgv...)},
		{"mosaic run --scope", []string{b.mosaic, "run", "--scope", "--workspace", b.ws, "--", "/usr/bin/true"}},
	}
	if srt != "" {
		cases = append(cases, struct {
			name string
			argv []string
		}{"srt (sandbox-runtime)", []string{srt, "true"}})
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
			if c.name == "srt (sandbox-runtime)" {
				r.Notes = append(r.Notes, "srt could not run here: "+firstLine(err.Error()))
				continue
			}
			return err
		}
		r.OneShot = append(r.OneShot, s)
	}
	// One at a time: the four that the targets compare, in turn, each after
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
		case handRolledName, "mosaic run", scopePeerName, "mosaic run --scope":
			spaced = append(spaced, c)
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

// startLatency: from the command until the session runs (start returns).
// The sessions are stopped after each series, outside the timing.
func (b *bench) startLatency(r *Report) error {
	progress("start latency: %d starts each", b.n)
	var started []string
	s, err := measure("mosaic start", "mosaic start --name NAME -- sleep 600", b.n, func() error {
		name := fmt.Sprintf("bench-start-%d", len(started))
		started = append(started, name)
		return runCmd([]string{b.mosaic, "start", "--name", name, "--workspace", b.ws, "--", "sleep", "600"})
	})
	_ = parallel(len(started), func(i int) error { stopQuietly(b.mosaic, started[i]); return nil })
	if err != nil {
		return err
	}
	r.Start = append(r.Start, s)
	var srUnits []string
	s, err = measure("systemd-run, same properties and bwrap argv", "systemd-run --user -p … (returns at READY)", b.n, func() error {
		name := fmt.Sprintf("bench-sr-start-%d", len(srUnits))
		argv, err := b.equivalent(name, []string{"sleep", "600"}, false)
		if err != nil {
			return err
		}
		srUnits = append(srUnits, units.UnitName(name)+"-sr")
		return runCmd(argv)
	})
	_ = runCmd(append([]string{"systemctl", "--user", "stop"}, srUnits...))
	if err != nil {
		return err
	}
	r.Start = append(r.Start, s)
	return nil
}

func stopQuietly(mosaic, name string) {
	exec.Command(mosaic, "stop", "--timeout", "2s", name).Run()
	exec.Command(mosaic, "rm", name).Run()
}

// peerManyName is the row of 100 systemd-run equivalents started at once.
const peerManyName = "100 systemd-run processes at once, same properties and bwrap argv, until all active"

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
		p, err := b.m.Plan(request.Request{Name: name, Workspace: b.ws, Command: []string{"sleep", "600"}})
		if err != nil {
			return err
		}
		plans[i] = p
	}
	t := time.Now()
	if err := parallel(batch, func(i int) error { _, err := b.m.Start(ctx, plans[i]); return err }); err != nil {
		return err
	}
	r.Concurrency = append(r.Concurrency, Stat{Name: "100 starts from one process (one connection), until all active", N: 1, MeanMs: ms(time.Since(t))})
	if err := b.list(r, "mosaic list at 100 sessions"); err != nil {
		return err
	}

	progress("concurrency: %d starts from %d processes", batch, batch)
	t = time.Now()
	if err := parallel(batch, func(i int) error {
		return runCmd([]string{b.mosaic, "start", "--name", many[i], "--workspace", b.ws, "--", "sleep", "600"})
	}); err != nil {
		return err
	}
	r.Concurrency = append(r.Concurrency, Stat{Name: "100 `mosaic start` processes at once, until all active", N: 1, MeanMs: ms(time.Since(t))})

	// The peer: 100 systemd-run processes at once with the same properties
	// and ExecStart, each returning at READY, as mosaic start does. Its
	// time is what this machine's user manager takes for 100 such units,
	// whoever asks.
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
	t = time.Now()
	err := parallel(batch, func(i int) error { return runCmd(peers[i]) })
	r.Concurrency = append(r.Concurrency, Stat{Name: peerManyName, N: 1, MeanMs: ms(time.Since(t))})
	_ = runCmd(append([]string{"systemctl", "--user", "stop"}, peerUnits...))
	if err != nil {
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
	r.Concurrency = append(r.Concurrency, Stat{Name: "stopping 200 sessions from one process, until all down", N: 1, MeanMs: ms(time.Since(t))})
	for _, name := range all {
		_ = b.m.Remove(ctx, name, true)
	}
	return nil
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
)

// breakdown averages MOSAIC_TRACE's steps over runs of mosaic run and of
// mosaic run --scope.
func (b *bench) breakdown(r *Report) error {
	progress("where the time of mosaic run goes")
	var err error
	if r.Breakdown, err = b.trace(); err != nil {
		return err
	}
	r.ScopeBreakdown, err = b.trace("--scope")
	return err
}

func (b *bench) trace(flags ...string) ([]Stat, error) {
	steps := map[string][]float64{}
	var order []string
	for i := 0; i < b.n; i++ {
		argv := append(append([]string{"run"}, flags...), "--workspace", b.ws, "--", "/usr/bin/true")
		cmd := exec.Command(b.mosaic, argv...)
		cmd.Env = append(os.Environ(), "MOSAIC_TRACE=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("mosaic run: %v: %s", err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			rest, ok := strings.CutPrefix(l, "mosaic trace: ")
			if !ok {
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
	return out, nil
}

func ratios(r *Report) []Ratio {
	get := func(list []Stat, name string) float64 {
		for _, s := range list {
			if s.Name == name {
				return s.MeanMs
			}
		}
		return 0
	}
	var out []Ratio
	mosaic, sr := get(r.OneShot, "mosaic run"), get(r.OneShot, "systemd-run, same properties and bwrap argv")
	if mosaic > 0 && sr > 0 {
		out = append(out, Ratio{"one-shot: mosaic run / systemd-run equivalent", mosaic / sr, "≤ 1.0 (stretch 0.8)", mosaic/sr <= 1.0})
	}
	// The targets of issue 21, one at a time (Spaced) and back to back.
	for _, t := range []struct {
		how  string
		list []Stat
	}{{"one at a time", r.Spaced}, {"back to back", r.OneShot}} {
		if m, hr := get(t.list, "mosaic run"), get(t.list, handRolledName); m > 0 && hr > 0 {
			out = append(out, Ratio{"one-shot, " + t.how + ": mosaic run / hand-rolled systemd-run service + plain bwrap", m / hr, "≤ 1.15", m/hr <= 1.15})
		}
		// The peer runs bwrap alone: no init, no checks, no state.
		if sc, p := get(t.list, "mosaic run --scope"), get(t.list, scopePeerName); sc > 0 && p > 0 {
			out = append(out, Ratio{"one-shot, " + t.how + ": mosaic run --scope / systemd-run --scope + plain bwrap", sc / p, "≤ 1.3", sc/p <= 1.3})
		}
	}
	scope := get(r.OneShot, "mosaic run --scope")
	if scope > 0 && mosaic > 0 {
		out = append(out, Ratio{"one-shot: mosaic run --scope / mosaic run (service)", scope / mosaic, "—", true})
	}
	if srt := get(r.OneShot, "srt (sandbox-runtime)"); srt > 0 && mosaic > 0 {
		out = append(out, Ratio{"one-shot: srt / mosaic run", srt / mosaic, "≥ 10", srt/mosaic >= 10})
		if scope > 0 {
			out = append(out, Ratio{"one-shot: srt / mosaic run --scope", srt / scope, "≥ 20", srt/scope >= 20})
		}
	}
	if st, sr := get(r.Start, "mosaic start"), get(r.Start, "systemd-run, same properties and bwrap argv"); st > 0 && sr > 0 {
		out = append(out, Ratio{"start: mosaic start / systemd-run equivalent", st / sr, "≤ 1.0", st/sr <= 1.0})
	}
	for _, c := range r.Concurrency {
		switch {
		case strings.HasPrefix(c.Name, "100 starts"):
			out = append(out, Ratio{c.Name + " (s)", c.MeanMs / 1000, "≤ 3 s", c.MeanMs <= 3000})
		case strings.HasPrefix(c.Name, "100 `mosaic start`"):
			out = append(out, Ratio{c.Name + " (s)", c.MeanMs / 1000, "≤ 1.5 s", c.MeanMs <= 1500})
			if peer := get(r.Concurrency, peerManyName); peer > 0 {
				out = append(out, Ratio{"100 at once: mosaic start / systemd-run equivalent", c.MeanMs / peer, "—", true})
			}
		case c.Name == "mosaic list at 200 sessions":
			out = append(out, Ratio{c.Name + " (ms)", c.MeanMs, "≤ 40 ms", c.MeanMs <= 40})
		}
	}
	if f := r.Footprint["pss_per_session"]; f > 0 {
		out = append(out, Ratio{"memory per idle session beyond its command (MiB, PSS)", f, "≤ 3 MiB", f <= 3})
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
