package units

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"mosaic/internal/errcode"
	"mosaic/sandbox"
	"mosaic/sandbox/egress"

	sd "github.com/coreos/go-systemd/v22/dbus"
)

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"claude-1", true},
		{"0abc", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), false},
		{"", false},
		{"Upper", false},
		{"a/b", false},
		{"a.b", false},
		{"a%b", false},
		{"a b", false},
		{"-lead", false},
		{"under_score", false},
		{"bus", false},
		{"x-egress", false},
	} {
		err := ValidateName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil {
			if e, ok := err.(*errcode.Error); !ok || e.Exit != errcode.ExitBadInput || e.Code != "bad-name" {
				t.Errorf("ValidateName(%q) error %#v, want bad-name with exit 2", tc.name, err)
			}
		}
	}
}

func TestSessionName(t *testing.T) {
	for unit, want := range map[string]string{
		"mosaic-abc.service":       "abc service",
		"mosaic-bus.service":       " ",
		"mosaic-a-egress.service":  " ",
		"mosaic-abc.scope":         "abc scope",
		"mosaic-abc.socket":        " ",
		"other-abc.service":        " ",
		"mosaic-Bad.service":       " ",
		UnitName("claude-3fa9c2"):  "claude-3fa9c2 service",
		ScopeName("claude-3fa9c2"): "claude-3fa9c2 scope",
	} {
		if name, kind := SessionName(unit); name+" "+kind != want {
			t.Errorf("SessionName(%q) = %q %q, want %q", unit, name, kind, want)
		}
	}
}

func TestGenerateName(t *testing.T) {
	for _, cmd := range [][]string{nil, {"/usr/bin/Claude"}, {"..."}, {strings.Repeat("x", 100)}, {"a_b.c"}} {
		n := GenerateName(cmd)
		if err := ValidateName(n); err != nil {
			t.Errorf("GenerateName(%q) = %q, not a valid name: %v", cmd, n, err)
		}
	}
	if n := GenerateName([]string{"/usr/bin/Claude"}); !strings.HasPrefix(n, "claude-") {
		t.Errorf("GenerateName(claude) = %q, want the command's base name first", n)
	}
	//lint:ignore SA4000 two calls, each with its own random suffix
	if GenerateName([]string{"x"}) == GenerateName([]string{"x"}) {
		t.Error("two generated names are equal")
	}
}

func TestParseVersion(t *testing.T) {
	for s, want := range map[string]int{"252.38-1~deb12u1": 252, `"257"`: 257, "258~rc1": 258, "v245.4-1.fc32": 245, "": 0, "x": 0} {
		if got := ParseVersion(s); got != want {
			t.Errorf("ParseVersion(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestParseLimits(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{{"1024", 1024, true}, {"2K", 2048, true}, {"512M", 512 << 20, true}, {"4G", 4 << 30, true}, {"1t", 1 << 40, true}, {"0", 0, false}, {"-1", 0, false}, {"G", 0, false}, {"99999999999T", 0, false},
		// strconv.ParseFloat reads "NaN" (and Go turns NaN into 2^63): a
		// size of 8 EiB, no limit, from a launch or a profile.
		{"NaN", 0, false}, {"nanG", 0, false}, {"Inf", 0, false}} {
		got, err := ParseSize("memory-max", tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	if v, err := ParsePercent("cpu-quota", "150%"); err != nil || v != 150 {
		t.Errorf("ParsePercent(150%%) = %d, %v", v, err)
	}
	for _, bad := range []string{"150", "0%", "x%", ""} {
		if _, err := ParsePercent("cpu-quota", bad); err == nil {
			t.Errorf("ParsePercent(%q) accepted", bad)
		}
	}
	if d, err := ParseDuration("runtime-max", "90s"); err != nil || d != 90*time.Second {
		t.Errorf("ParseDuration(90s) = %v, %v", d, err)
	}
	for _, bad := range []string{"0s", "-1s", "1ns", "999ns", "soon"} {
		if _, err := ParseDuration("runtime-max", bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
	if _, err := ParseCount("tasks-max", "0"); err == nil {
		t.Error("ParseCount(0) accepted")
	}
}

func testSpec() Spec {
	return Spec{
		Name:       "s1",
		Command:    []string{"sh", "-c", "echo $HOME ${SECRET}"},
		Workspace:  "/home/u/proj",
		Home:       "/home/u",
		RuntimeDir: "/run/user/1000",
		StateDir:   "/home/u/.local/state/mosaic/sessions/s1",
		MosaicBin:  "/home/u/go/bin/mosaic",
		StageBin:   "/home/u/go/bin/mosaic-stage",
		BwrapBin:   "/usr/bin/bwrap",
		Promise:    sandbox.Promise{NS: map[string]string{"mnt": "mnt:[1]"}},
		ExtraRO:    []string{"/opt/data"},
		ExtraRW:    []string{"/srv/cache"},
	}
}

func props(ps []sd.Property) map[string]sd.Property {
	m := map[string]sd.Property{}
	for _, p := range ps {
		if _, dup := m[p.Name]; dup {
			panic("duplicate property " + p.Name)
		}
		m[p.Name] = p
	}
	return m
}

// TestPropertySignatures pins every property to the D-Bus type systemd
// expects: a wrong one (an int where systemd wants a uint64) fails the whole
// StartTransientUnit call.
func TestPropertySignatures(t *testing.T) {
	s := testSpec()
	s.Limits = Limits{MemoryMax: 1 << 30, TasksMax: 64, CPUQuota: 50, RuntimeMax: time.Minute}
	s.Env = []string{"TERM=xterm"}
	l := Launch{Stdio: &[3]int{0, 1, 2}, CredentialFile: "/proc/4242/fd/7"}
	s.NameGiven = true
	s.Credentials = []string{"ANTHROPIC_API_KEY"}
	got := props(Render(s, l, FeaturesFor(257)).Properties)
	want := map[string]string{
		"Description": "s", "Slice": "s", "ExecStartEx": "a(sasas)", "Type": "s", "NotifyAccess": "s",
		"WorkingDirectory": "s", "PrivateUsers": "b", "PrivateTmp": "b", "ProtectSystem": "s",
		"TemporaryFileSystem": "a(ss)", "BindPaths": "a(ssbt)", "BindReadOnlyPaths": "a(ssbt)",
		"NoNewPrivileges": "b", "KillMode": "s", "TimeoutStopUSec": "t", "TimeoutStartUSec": "t",
		"SuccessExitStatus": "(aiai)", "SyslogIdentifier": "s", "LogExtraFields": "aay", "Environment": "as",
		"PrivatePIDs": "s", "MemoryMax": "t", "TasksMax": "t", "CPUQuotaPerSecUSec": "t", "RuntimeMaxUSec": "t",
		"StandardInputFileDescriptor": "h", "StandardOutputFileDescriptor": "h", "StandardErrorFileDescriptor": "h",
		"CollectMode": "s", "EnvironmentFiles": "a(sb)", "ExecStopPost": "a(sasb)", "PrivateNetwork": "b",
		"SyslogLevelPrefix": "b",
	}
	for name, sig := range want {
		p, ok := got[name]
		if !ok {
			t.Errorf("property %s missing", name)
			continue
		}
		if g := p.Value.Signature().String(); g != sig {
			t.Errorf("property %s has signature %s, want %s", name, g, sig)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected property %s", name)
		}
	}
	if v := got["CPUQuotaPerSecUSec"].Value.Value().(uint64); v != 500000 {
		t.Errorf("CPUQuotaPerSecUSec = %d, want 500000 for 50%%", v)
	}
}

func TestPropertiesGating(t *testing.T) {
	s := testSpec()
	p := props(Render(s, Launch{}, FeaturesFor(252)).Properties)
	for _, absent := range []string{"PrivatePIDs", "MemoryMax", "TasksMax", "CPUQuotaPerSecUSec", "RuntimeMaxUSec",
		"StandardInputFileDescriptor", "CollectMode", "Environment"} {
		if _, ok := p[absent]; ok {
			t.Errorf("%s sent to a 252 manager without being asked for", absent)
		}
	}
	if _, ok := props(Render(s, Launch{}, FeaturesFor(257)).Properties)["PrivatePIDs"]; !ok {
		t.Error("PrivatePIDs not sent to a 257 manager")
	}
	if v := p["TimeoutStopUSec"].Value.Value().(uint64); v != uint64(DefaultStopTimeout/time.Microsecond) {
		t.Errorf("TimeoutStopUSec = %d, want the default", v)
	}
}

func TestPropertiesConfinement(t *testing.T) {
	s := testSpec()
	p := props(Render(s, Launch{}, FeaturesFor(252)).Properties)
	tmpfs := p["TemporaryFileSystem"].Value.Value().([]tmpfsEntry)
	if len(tmpfs) != 2 || tmpfs[0].Path != s.Home || tmpfs[1].Path != s.RuntimeDir {
		t.Errorf("TemporaryFileSystem = %v, want the home and the runtime dir", tmpfs)
	}
	rw := p["BindPaths"].Value.Value().([]bindEntry)
	if len(rw) != 3 || rw[0].Src != s.Workspace || rw[1].Src != s.StateDir || rw[2].Src != "/srv/cache" {
		t.Errorf("BindPaths = %v, want workspace, state dir, --rw", rw)
	}
	ro := p["BindReadOnlyPaths"].Value.Value().([]bindEntry)
	var roPaths []string
	for _, b := range ro {
		roPaths = append(roPaths, b.Src)
		if b.IgnoreENOENT || b.Flags != 0 || b.Src != b.Dst {
			t.Errorf("read-only bind %v: want same-path, no ignore, no flags", b)
		}
	}
	// mosaic itself is not needed in the unit without --may-launch; bwrap
	// under /usr is seen there without a bind (unless this machine has none
	// there: then it is bound, as a path that cannot be resolved is).
	want := "/home/u/go/bin/mosaic-stage /run/user/1000/systemd/notify /opt/data"
	if hiddenFromUnit(s.BwrapBin) {
		want = "/home/u/go/bin/mosaic-stage /usr/bin/bwrap /run/user/1000/systemd/notify /opt/data"
	}
	if strings.Join(roPaths, " ") != want {
		t.Errorf("BindReadOnlyPaths = %v, want %s", roPaths, want)
	}
	s.MayLaunch, s.BusDir = true, "/run/user/1000/mosaic/bus"
	ro = props(Render(s, Launch{}, FeaturesFor(252)).Properties)["BindReadOnlyPaths"].Value.Value().([]bindEntry)
	if !slices.ContainsFunc(ro, func(b bindEntry) bool { return b.Src == s.MosaicBin }) {
		t.Errorf("--may-launch: mosaic (bwrap binds it at %s) is not bound into the unit: %v", sandbox.BinInside, ro)
	}
	for _, b := range []string{"PrivateUsers", "PrivateTmp", "NoNewPrivileges"} {
		if p[b].Value.Value() != true {
			t.Errorf("%s is not true", b)
		}
	}
	if p["ProtectSystem"].Value.Value() != "strict" || p["Slice"].Value.Value() != Slice {
		t.Error("ProtectSystem or Slice wrong")
	}
	exec := p["ExecStartEx"].Value.Value().([]execEx)
	if len(exec) != 1 || strings.Join(exec[0].Flags, ",") != "no-env-expand" {
		t.Fatalf("ExecStartEx = %v, want one command with no-env-expand", exec)
	}
	argv := exec[0].Argv
	if argv[0] != s.StageBin || argv[1] != "exec-bwrap" || argv[2] != "--promise" || argv[3] != s.Promise.Encode() || argv[4] != "--home-store" || argv[5] != s.StateDir || argv[6] != s.BwrapBin {
		t.Errorf("ExecStart starts %v, want the stage binary's shim with the promise and the state directory, then bwrap", argv[:7])
	}
	tail := strings.Join(argv[len(argv)-9:], " ")
	if tail != "init --session s1 --home /home/u -- sh -c echo $HOME ${SECRET}" {
		t.Errorf("ExecStart ends %q", tail)
	}
	lef := p["LogExtraFields"].Value.Value().([][]byte)
	if len(lef) != 1 || string(lef[0]) != "MOSAIC_SESSION=s1" {
		t.Errorf("LogExtraFields = %q", lef)
	}
}

func TestDescription(t *testing.T) {
	d := Description("a", []string{strings.Repeat("x", 500)})
	if len(d) != 200 || !strings.HasPrefix(d, DescriptionPrefix+"a: ") {
		t.Errorf("Description = %q (%d)", d, len(d))
	}
}

func TestCredentialsInTheUnit(t *testing.T) {
	s := testSpec()
	s.Credentials = []string{"ANTHROPIC_API_KEY"}
	l := Launch{CredentialFile: "/proc/4242/fd/7"}
	p := props(Render(s, l, FeaturesFor(252)).Properties)
	ef := p["EnvironmentFiles"].Value.Value().([]envFile)
	if len(ef) != 1 || ef[0].Path != l.CredentialFile || !ef[0].IgnoreMissing {
		t.Errorf("EnvironmentFiles = %v", ef)
	}
	argv := strings.Join(p["ExecStartEx"].Value.Value().([]execEx)[0].Argv, " ")
	if strings.Contains(argv, "--drop") || !strings.Contains(argv, "--credential ANTHROPIC_API_KEY --") {
		t.Errorf("ExecStart %q: want no file to drop (it is held in memory) and the init to require the credential", argv)
	}
	if rw := fmt.Sprint(p["BindPaths"].Value.Value()); strings.Contains(rw, "/proc") || strings.Contains(rw, "credentials") {
		t.Errorf("a credential path is bound: %v", rw)
	}
	// Held through a link in the runtime directory (credentials.Hold): the
	// unit's first process removes the link, from its directory bound in.
	l.CredentialFile = s.RuntimeDir + "/mosaic/credentials/s1/env"
	p = props(Render(s, l, FeaturesFor(252)).Properties)
	argv = strings.Join(p["ExecStartEx"].Value.Value().([]execEx)[0].Argv, " ")
	if !strings.Contains(argv, "--drop "+l.CredentialFile+" ") {
		t.Errorf("ExecStart %q: want the shim to drop the link", argv)
	}
	if rw := fmt.Sprint(p["BindPaths"].Value.Value()); !strings.Contains(rw, "{"+filepath.Dir(l.CredentialFile)+" "+filepath.Dir(l.CredentialFile)+" true") {
		t.Errorf("the link's directory is not bound (missing allowed): %v", rw)
	}
}

func TestEndRecordOnlyWhereKept(t *testing.T) {
	for _, tc := range []struct {
		label string
		run   bool
		named bool
		cred  bool
		want  bool
	}{
		{"start", false, false, false, true},
		{"unnamed run", true, false, false, false},
		{"named run", true, true, false, true},
		// Nothing on disk to guard: the credentials are held in memory.
		{"unnamed run with a credential", true, false, true, false},
	} {
		s, l := testSpec(), Launch{}
		s.NameGiven = tc.named
		if tc.run {
			l.Stdio = &[3]int{0, 1, 2}
		}
		if tc.cred {
			l.CredentialFile = "/proc/4242/fd/7"
		}
		_, got := props(Render(s, l, FeaturesFor(252)).Properties)["ExecStopPost"]
		if got != tc.want {
			t.Errorf("%s: ExecStopPost present %v, want %v", tc.label, got, tc.want)
		}
	}
}

// TestScopeProperties: a scope gets its cgroup and limits and no property
// a scope does not take (systemd refuses the whole call for one).
func TestScopeProperties(t *testing.T) {
	s := testSpec()
	s.Scope = true
	s.Limits = Limits{MemoryMax: 1 << 30, TasksMax: 64, CPUQuota: 50, RuntimeMax: time.Minute}
	got := props(Render(s, Launch{InitPID: 4242}, Features{}).Properties)
	want := map[string]string{"Description": "s", "Slice": "s", "PIDs": "au", "TimeoutStopUSec": "t", "CollectMode": "s",
		"MemoryMax": "t", "TasksMax": "t", "CPUQuotaPerSecUSec": "t", "RuntimeMaxUSec": "t"}
	for name, sig := range want {
		if p, ok := got[name]; !ok || p.Value.Signature().String() != sig {
			t.Errorf("property %s missing or not %s", name, sig)
		}
	}
	if len(got) != len(want) {
		t.Errorf("scope properties %v, want exactly %v", got, want)
	}
	if pids := got["PIDs"].Value.Value().([]uint32); len(pids) != 1 || pids[0] != 4242 {
		t.Errorf("PIDs = %v", pids)
	}
	if s.Unit() != "mosaic-s1.scope" || s.Kind() != KindScope {
		t.Errorf("unit %s kind %s", s.Unit(), s.Kind())
	}
}

// TestScopeBwrap: a scope's bwrap (no shim) reports the init's PID and
// holds it; its command line ends in the init, whose arguments (the
// command's among them) stay off it. A service's bwrap does neither.
func TestScopeBwrap(t *testing.T) {
	s := testSpec()
	s.TTY = true
	s.Command = []string{"secret-looking-command", "arg"}
	svc := strings.Join(ExecArgv(s, Launch{}), " ")
	if strings.Contains(svc, "--info-fd") || strings.Contains(svc, "--go-fd") {
		t.Errorf("service argv reports or holds: %s", svc)
	}
	if !strings.Contains(svc, " init --session s1 --home /home/u --tty ") {
		t.Errorf("the init is not told of its terminal: %s", svc)
	}
	s.Scope = true
	argv, initArgs := ScopeBwrap(s)
	scope := strings.Join(argv, " ")
	if argv[0] != s.BwrapBin || !strings.HasSuffix(scope, " -- /run/mosaic/init init") {
		t.Errorf("scope bwrap argv %s", scope)
	}
	if !strings.Contains(scope, "--info-fd 3") || strings.Contains(scope, "--block-fd") || strings.Contains(scope, "exec-bwrap") {
		t.Errorf("scope bwrap does not report, holds the init before it runs, or has a shim: %s", scope)
	}
	if strings.Contains(scope, "secret-looking-command") {
		t.Errorf("the command is on bwrap's command line: %s", scope)
	}
	if got := strings.Join(initArgs, " "); !strings.HasPrefix(got, "--session s1 --home /home/u --tty ") || !strings.HasSuffix(got, "-- secret-looking-command arg") {
		t.Errorf("init args %q", got)
	}
}

// TestNetworkProperties: none gives the unit a network namespace of its
// own, which bwrap's sandbox shares; allow binds the session to its egress
// proxy's socket unit (the proxy starts on the first connection), with the
// socket directory bound; host gives neither.
func TestNetworkProperties(t *testing.T) {
	s := testSpec()
	s.MosaicBin = "/usr/bin/mosaic"
	s.EgressDir = "/run/user/1000/mosaic/egress/s1"
	for _, tc := range []struct {
		network          string
		privateNet, deps bool
	}{{"none", true, false}, {"allow", true, true}, {"host", false, false}} {
		s.Network = tc.network
		s.Allow = []string{"api.example.com:443"}
		p := props(Render(s, Launch{}, FeaturesFor(252)).Properties)
		_, pn := p["PrivateNetwork"]
		_, req := p["BindsTo"] // a proxy that dies stops the session (31.14)
		argv := strings.Join(ExecArgv(s, Launch{}), " ")
		// The unit's network namespace is the sandbox's: bwrap makes none
		// (a scope's bwrap does, TestScopeBwrap...).
		if pn != tc.privateNet || req != tc.deps || strings.Contains(argv, "--unshare-net") {
			t.Errorf("%s: PrivateNetwork %v, BindsTo %v, argv %s", tc.network, pn, req, argv)
		}
		if scope, _ := ScopeBwrap(s); slices.Contains(scope, "--unshare-net") != tc.privateNet {
			t.Errorf("%s: a scope's bwrap (no unit layer) %v", tc.network, scope)
		}
		post := fmt.Sprint(p["ExecStopPost"].Value.Value())
		if strings.Contains(post, "--egress-alive "+s.EgressDir+"/") != tc.deps {
			t.Errorf("%s: ExecStopPost %s: want it to look at the proxy's mark of life exactly with network allow", tc.network, post)
		}
		if strings.Contains(argv, "--egress") != tc.deps || strings.Contains(argv, s.EgressDir) != tc.deps {
			t.Errorf("%s: init or egress bind wrong: %s", tc.network, argv)
		}
		aux := Render(s, Launch{}, Features{}).Aux
		if (len(aux) == 2) != tc.deps || (!tc.deps && len(aux) != 0) {
			t.Errorf("%s: aux units %v", tc.network, aux)
		}
		if tc.deps {
			if aux[0].Name != "mosaic-s1-egress.socket" || aux[1].Name != "mosaic-s1-egress.service" {
				t.Errorf("egress units %s, %s", aux[0].Name, aux[1].Name)
			}
			if v := fmt.Sprint(p["BindsTo"].Value.Value()); v != "[mosaic-s1-egress.socket]" {
				t.Errorf("the session is bound to %s, not its proxy's socket unit (which starts no process)", v)
			}
			e := props(aux[1].Properties)
			for _, name := range []string{"PrivateUsers", "ProtectSystem", "TemporaryFileSystem", "PartOf", "PropagatesStopTo", "NoNewPrivileges", "MemoryMax", "TasksMax"} {
				if _, ok := e[name]; !ok {
					t.Errorf("the egress unit lacks %s", name)
				}
			}
			if _, ok := e["EnvironmentFiles"]; ok {
				t.Error("the egress unit reads an environment file though nothing is injected")
			}
			if _, ok := e["PrivateNetwork"]; ok {
				t.Error("the egress unit has no network of the host: it is the way out")
			}
			if d := e["Description"].Value.Value().(string); strings.HasPrefix(d, DescriptionPrefix) {
				t.Errorf("the egress unit would be listed as a session: %s", d)
			}
		}
	}
}

// TestEgressInjection: a session with injected credentials gives its egress
// unit the rules on its command line (names, never values), its own
// environment file, and that file's directory bound so the proxy can
// delete it.
func TestEgressInjection(t *testing.T) {
	s := testSpec()
	s.MosaicBin = "/usr/bin/mosaic"
	s.Network = "allow"
	s.EgressDir = "/run/user/1000/mosaic/egress/s1"
	s.Inject = []egress.Rule{{Var: "ANTHROPIC_API_KEY", Headers: []string{"X-Api-Key"}, Hosts: []string{"api.anthropic.com:443"}}}
	l := Launch{EgressCredentialFile: "/proc/4242/fd/8"}
	e := props(egressProperties(session{s, l}))
	argv := fmt.Sprint(e["ExecStartEx"].Value.Value())
	if !strings.Contains(argv, "--inject ANTHROPIC_API_KEY=X-Api-Key@api.anthropic.com:443") || strings.Contains(argv, "--drop") {
		t.Errorf("argv %s", argv)
	}
	if f := fmt.Sprint(e["EnvironmentFiles"].Value.Value()); !strings.Contains(f, l.EgressCredentialFile) {
		t.Errorf("EnvironmentFiles %s", f)
	}
	if b := fmt.Sprint(e["BindPaths"].Value.Value()); strings.Contains(b, "/proc") {
		t.Errorf("BindPaths %s", b)
	}
}

// Sizes and durations as systemd and docker take them.
func TestSizesAndDurations(t *testing.T) {
	for s, want := range map[string]uint64{"4G": 4 << 30, "4GB": 4 << 30, "4GiB": 4 << 30, "4g": 4 << 30, "512M": 512 << 20, "1.5G": 3 << 29, "4096": 4096, "2T": 2 << 40} {
		if got, err := ParseSize("memory-max", s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0", "-1G", "4X", "G", "1e9", "0.0000001K", "99999999999P"} {
		if _, err := ParseSize("memory-max", s); err == nil {
			t.Errorf("ParseSize(%q) accepted", s)
		}
	}
	for s, want := range map[string]time.Duration{"5": 5 * time.Second, "90s": 90 * time.Second, "1min 30s": 90 * time.Second,
		"1h30m": 90 * time.Minute, "2h": 2 * time.Hour, "1.5h": 90 * time.Minute, "500ms": 500 * time.Millisecond, "1d": 24 * time.Hour, "0.5": 500 * time.Millisecond} {
		if got, err := ParseDuration("runtime-max", s); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0", "1ns", "-5s", "5x", "s", "1e3", "NaN", "Inf"} {
		if _, err := ParseDuration("runtime-max", s); err == nil {
			t.Errorf("ParseDuration(%q) accepted", s)
		}
	}
	if d, err := ParseTimeout("timeout", "0"); err != nil || d != 0 {
		t.Errorf("ParseTimeout(0) = %v, %v", d, err)
	}
}

// The name check is a loop; it must accept exactly what the pattern it
// replaced did.
func TestValidNameMatchesPattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	cases := []string{"", "a", "-a", "a-", "A", "a_b", "fix-42", "0", "é", "a.b", "a b", strings.Repeat("a", 63), strings.Repeat("a", 64), "a\n", "ab-cd-"}
	for _, c := range cases {
		if got, want := validName(c), pattern.MatchString(c); got != want {
			t.Errorf("validName(%q) = %v, the pattern says %v", c, got, want)
		}
	}
}

// TestDescriptionUTF8 (31.10): the Description is valid UTF-8 whatever the
// command: cut on a character's boundary at any padding, with a byte that
// is not UTF-8 shown as \xNN.
func TestDescriptionUTF8(t *testing.T) {
	for pad := 0; pad < 4; pad++ {
		cmd := []string{"printf", "%s", strings.Repeat("x", pad) + strings.Repeat("修", 80)}
		d := Description("s1", cmd)
		if !utf8.ValidString(d) || len(d) > 200 || !strings.HasSuffix(d, "修...") {
			t.Errorf("pad %d: %q (%d bytes, valid %v)", pad, d, len(d), utf8.ValidString(d))
		}
	}
	if d := Description("s1", []string{"echo", "a\xffb", "ws-\xff"}); d != DescriptionPrefix+`s1: echo a\xffb ws-\xff` {
		t.Errorf("not UTF-8: %q", d)
	}
}

// TestNotUTF8Refused (31.10): what D-Bus cannot carry is refused with a
// clear code; a command's arguments in the default sandbox are carried.
func TestNotUTF8Refused(t *testing.T) {
	for _, tc := range []struct {
		label string
		set   func(*Spec)
		code  string
	}{
		{"workspace", func(s *Spec) { s.Workspace = "/home/u/ws-\xff" }, "bad-workspace"},
		{"bind", func(s *Spec) { s.ExtraRO = []string{"/opt/\xff"} }, "bad-bind"},
		{"env", func(s *Spec) { s.Env = []string{"LANG=\xff"} }, "bad-env"},
		{"landlock argument", func(s *Spec) { s.Sandbox = sandbox.ModeLandlock; s.Command = []string{"echo", "a\xffb"} }, "bad-command"},
		{"argument", func(s *Spec) { s.Command = []string{"echo", "a\xffb"} }, ""},
		{"scope argument", func(s *Spec) { s.Scope = true; s.Command = []string{"echo", "a\xffb"} }, ""},
	} {
		s := testSpec()
		tc.set(&s)
		err := carriable(s)
		var e *errcode.Error
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.label, err)
		case tc.code != "" && (!errors.As(err, &e) || e.Code != tc.code || !utf8.ValidString(e.Message)):
			t.Errorf("%s: %v, want %s", tc.label, err, tc.code)
		}
	}
}

// TestHiddenFromUnit: a bind of one of mosaic's binaries is left out only
// where the unit sees the file anyway, under /usr with its links resolved.
func TestHiddenFromUnit(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "bwrap")
	if err := os.Symlink("/usr/bin/env", link); err != nil {
		t.Fatal(err)
	}
	usrLink := "/usr/../" + strings.TrimPrefix(dir, "/") // under /usr by its text only
	for path, want := range map[string]bool{
		filepath.Join(dir, "absent"):      true, // cannot be resolved: bound
		link:                              true, // not under /usr itself
		"/usr/bin/mosaic-absent-xyz":      true, // under /usr but not there
		usrLink + "/bwrap":                true, // resolves outside /usr
		"/home/u/go/bin/mosaic-stage":     true,
		"/run/user/1000/bin/mosaic-stage": true,
	} {
		if got := hiddenFromUnit(path); got != want {
			t.Errorf("hiddenFromUnit(%s) = %v, want %v", path, got, want)
		}
	}
	if _, err := os.Stat("/usr/bin/env"); err == nil && hiddenFromUnit("/usr/bin/env") {
		t.Error("/usr/bin/env, seen in every unit (ProtectSystem=strict), would be bound")
	}
}

// A binary the unit would see unbound under /usr is bound read-only all
// the same where the session may write it: under its workspace or an --rw
// path, a session could otherwise rewrite what a later session's unit runs
// outside bwrap.
func TestBinaryUnderWritableIsBound(t *testing.T) {
	if _, err := os.Stat("/usr/bin/env"); err != nil {
		t.Skip("no /usr/bin/env")
	}
	has := func(s Spec) bool { return slices.Contains(ReadOnlyPaths(s), "/usr/bin/env") }
	if has(Spec{Workspace: "/usr/lib", StageBin: "/usr/bin/env"}) {
		t.Error("/usr/bin/env, seen in every unit and not writable by the session, is bound")
	}
	if !has(Spec{Workspace: "/usr/lib", StageBin: "/usr/bin/env", ExtraRW: []string{"/usr/bin"}}) {
		t.Error("the stage binary under an --rw path is not bound read-only")
	}
	if !has(Spec{Workspace: "/usr", BwrapBin: "/usr/bin/env"}) {
		t.Error("bwrap under the workspace is not bound read-only")
	}
}

// TestTUNCapabilitiesOnlyWithTheDevice: a session with the network device
// gives its shim CAP_NET_ADMIN and CAP_NET_BIND_SERVICE, and asks the shim
// and the init for the device (--tun); one without gets no capability and
// no --tun (a shim told --tun without the capabilities would fail the
// start, and capabilities without it would reach bwrap undropped).
func TestTUNCapabilitiesOnlyWithTheDevice(t *testing.T) {
	for _, tun := range []bool{false, true} {
		s := testSpec()
		s.Network, s.TUN = sandbox.NetworkAllow, tun
		got := props(Render(s, Launch{}, FeaturesFor(257)).Properties)
		p, has := got["AmbientCapabilities"]
		if has != tun || has && (p.Value.Signature().String() != "t" || p.Value.Value().(uint64) != 1<<12|1<<10) {
			t.Errorf("TUN %v: AmbientCapabilities %v (present %v)", tun, p.Value, has)
		}
		argv := strings.Join(ExecArgv(s, Launch{}), " ")
		if n := strings.Count(argv, " --tun "); tun && n != 2 || !tun && n != 0 {
			t.Errorf("TUN %v: --tun %d times in %s", tun, n, argv)
		}
	}
}
