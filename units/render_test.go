package units

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"mosaic/sandbox"
	"mosaic/sandbox/egress"
	"mosaic/sandbox/publish"
)

var update = flag.Bool("update", false, "rewrite testdata/render.golden from this build")

// goldenSpec is a session of the golden table: its paths under
// directories no host has, so that no bind depends on the machine.
func goldenSpec(name string) Spec {
	home, rt := "/nonexistent/home/u", "/nonexistent/run/user/1000"
	state := filepath.Join(home, ".local/state/mosaic/sessions", name)
	return Spec{
		Name: name, NameGiven: true, Command: []string{"claude", "--flag", "$HOME"},
		Binary: "/nonexistent/opt/claude/bin/claude", Workspace: "/nonexistent/home/u/src/app",
		Home: home, RuntimeDir: rt, StateDir: state,
		MosaicBin: "/nonexistent/opt/mosaic/mosaic", StageBin: "/nonexistent/opt/mosaic/mosaic-stage",
		BwrapBin: "/usr/bin/bwrap", EgressDir: filepath.Join(rt, "mosaic/egress", name),
		Env:     []string{"TERM=xterm", "LANG=C.UTF-8"},
		Promise: sandbox.Promise{NS: map[string]string{"user": "user:[4026531837]"}, Home: home, HomeID: "1:2", TmpID: "1:3", RuntimeDir: rt, Net: true},
		Network: sandbox.NetworkNone,
	}
}

// goldenCases are ~20 sessions of every kind a start renders.
func goldenCases() []struct {
	name   string
	spec   Spec
	launch Launch
	f      Features
} {
	type tc = struct {
		name   string
		spec   Spec
		launch Launch
		f      Features
	}
	f252, f257 := FeaturesFor(252), FeaturesFor(257)
	s := func(name string, edit func(*Spec)) Spec {
		sp := goldenSpec(name)
		edit(&sp)
		return sp
	}
	fd, mfd := 7, 9
	return []tc{
		{"service", s("plain", func(*Spec) {}), Launch{}, f252},
		{"service-257", s("plain", func(*Spec) {}), Launch{}, f257},
		{"run-unnamed", s("claude-3fa9c2", func(sp *Spec) { sp.NameGiven = false }), Launch{Stdio: &[3]int{0, 1, 2}, TiePID: 4242}, f252},
		{"run-named", s("named-run", func(*Spec) {}), Launch{Stdio: &[3]int{0, 1, 2}, TiePID: 4243}, f252},
		{"start-pty", s("pty", func(sp *Spec) { sp.TTY = true }), Launch{Stdio: &[3]int{fd, fd, fd}, Attach: &mfd}, f252},
		{"network-allow", s("allow", func(sp *Spec) {
			sp.Network, sp.Allow, sp.Promise.Net = sandbox.NetworkAllow, []string{"example.com:443", "10.0.0.1:80"}, true
		}), Launch{}, f252},
		{"network-allow-registry", s("registry", func(sp *Spec) {
			sp.Network, sp.Allow = sandbox.NetworkAllow, []string{"registry.npmjs.org:443"}
		}), Launch{}, f252},
		{"network-allow-tun", s("tun", func(sp *Spec) {
			sp.Network, sp.Allow, sp.TUN, sp.NetBin = sandbox.NetworkAllow, []string{"example.com:443"}, true, "/nonexistent/opt/mosaic/mosaic-net"
			sp.Ask = 30 * time.Second
		}), Launch{}, f257},
		{"network-host", s("host", func(sp *Spec) { sp.Network, sp.Promise.Net = sandbox.NetworkHost, false }), Launch{}, f252},
		{"inject", s("inject", func(sp *Spec) {
			sp.Network, sp.Allow = sandbox.NetworkAllow, []string{"api.example.com:443"}
			sp.Inject = []egress.Rule{{Var: "API_KEY", Headers: []string{"X-Api-Key"}, Hosts: []string{"api.example.com:443"}}}
			sp.Credentials = []string{"API_KEY", "OTHER"}
			sp.CAFile, sp.CABundle = "/nonexistent/ca.pem", "/nonexistent/run/user/1000/mosaic/ca/inject.pem"
		}), Launch{CredentialFile: "/nonexistent/run/user/1000/mosaic/credentials/inject/env", EgressCredentialFile: "/nonexistent/run/user/1000/mosaic/credentials/inject-egress/env"}, f252},
		{"lend-git", s("lend", func(sp *Spec) {
			sp.Network, sp.Allow = sandbox.NetworkAllow, []string{"github.com:443"}
			sp.GitLends = []egress.GitLend{{Host: "github.com:443", Repo: "o/r", Ops: []string{"fetch", "push"}}}
			sp.GitConfig = filepath.Join(sp.StateDir, "home/.gitconfig")
		}), Launch{EgressCredentialFile: "/proc/4242/fd/5"}, f252},
		{"publish", s("pub", func(sp *Spec) {
			sp.Publish = []publish.Port{{Addr: "127.0.0.1", HostPort: 8080, Port: 80}, {Addr: "::1", HostPort: 8080, Port: 80}, {Addr: "127.0.0.1", HostPort: 9000, Port: 9000}}
		}), Launch{}, f252},
		{"ssh-agent", s("agent", func(sp *Spec) {
			sp.SSHAgent = &SSHAgent{Upstream: "/nonexistent/run/user/1000/ssh-agent.sock"}
		}), Launch{}, f252},
		{"landlock", s("ll", func(sp *Spec) {
			sp.Sandbox, sp.BwrapBin = sandbox.ModeLandlock, ""
			sp.Protect = []sandbox.Bind{{Kind: sandbox.KindRO, Src: "/nonexistent/home/u/src/app/.envrc", Dst: "/nonexistent/home/u/src/app/.envrc"}}
			sp.ExtraRO = []string{"/nonexistent/data"}
		}), Launch{CredentialFile: "/nonexistent/run/user/1000/mosaic/credentials/ll/env"}, f257},
		{"landlock-allow", s("llallow", func(sp *Spec) {
			sp.Sandbox, sp.BwrapBin, sp.Network, sp.Allow = sandbox.ModeLandlock, "", sandbox.NetworkAllow, []string{"example.com:443"}
		}), Launch{}, f252},
		{"clone", s("cl", func(sp *Spec) {
			sp.Clone = &Clone{Dir: filepath.Join(sp.StateDir, CloneDirName), Objects: "/nonexistent/home/u/src/app/.git/objects", Base: "abc", Kind: "git",
				Subs: []CloneSub{{Path: "lib", Module: "lib", Objects: "/nonexistent/home/u/src/app/.git/modules/lib/objects", Base: "def"}}}
			sp.WorkDir = "/nonexistent/home/u/src/app/sub"
		}), Launch{}, f252},
		{"clone-plain", s("plain-copy", func(sp *Spec) {
			sp.Clone = &Clone{Dir: filepath.Join(sp.StateDir, CloneDirName), Kind: ClonePlain}
		}), Launch{}, f252},
		{"direct-protect", s("direct", func(sp *Spec) {
			sp.OwnGitDir = filepath.Join(sp.StateDir, "git")
			sp.Protect = []sandbox.Bind{{Kind: sandbox.KindRO, Src: "/nonexistent/home/u/src/app/.envrc", Dst: "/nonexistent/home/u/src/app/.envrc"}}
			sp.ExtraRO, sp.ExtraRW = []string{"/nonexistent/data"}, []string{"/nonexistent/out"}
			sp.Toolchains, sp.ToolCache = []string{"/nonexistent/data"}, "/nonexistent/home/u/.cache/mosaic/tools/x"
			sp.SSHConfig = "/nonexistent/run/user/1000/mosaic/ssh-config"
			sp.SeccompAllow, sp.Pass = []string{"ptrace"}, []string{"FOO"}
		}), Launch{}, f252},
		{"limits", s("limited", func(sp *Spec) {
			sp.Limits = Limits{MemoryMax: 1 << 30, TasksMax: 100, CPUQuota: 150, RuntimeMax: time.Hour, TmpSize: 1 << 28, HomeSize: 1 << 29}
			sp.StopTimeout = 30 * time.Second
		}), Launch{}, f252},
		{"limits-infinity", s("unlimited", func(sp *Spec) {
			sp.Limits = Limits{CPUQuota: Infinity, MemoryMax: Infinity}
		}), Launch{}, f252},
		{"may-launch", s("launcher", func(sp *Spec) {
			sp.MayLaunch, sp.BusDir = true, "/nonexistent/run/user/1000/mosaic/bus"
		}), Launch{}, f252},
		{"finish", s(FinishName("cl"), func(sp *Spec) {
			sp.Command = []string{"/bin/sh", "-c", "echo $1", "mosaic-finish", "abc", "", "1000"}
			sp.Clone = &Clone{Dir: "/nonexistent/home/u/.local/state/mosaic/sessions/cl/clone", Objects: "/nonexistent/home/u/src/app/.git/objects", Base: "abc", Kind: "git"}
			sp.Limits.RuntimeMax = 5 * time.Minute
		}), Launch{Stdio: &[3]int{3, 4, 4}}, f252},
		{"scope", s("sc", func(sp *Spec) { sp.Scope = true; sp.Promise.Scope = "/mosaic.slice/mosaic-sc.scope" }), Launch{}, f252},
		{"scope-unnamed-allow", s("sc-3fa9c2", func(sp *Spec) {
			sp.Scope, sp.NameGiven, sp.Network, sp.Allow = true, false, sandbox.NetworkAllow, []string{"example.com:443"}
			sp.Clone = &Clone{Dir: filepath.Join(sp.StateDir, CloneDirName), Objects: "/nonexistent/home/u/src/app/.git/objects", Base: "abc", Kind: "git"}
			sp.Publish = []publish.Port{{Addr: "127.0.0.1", HostPort: 8080, Port: 80}}
		}), Launch{}, f252},
		{"scope-pty-tie", s("sc-tty", func(sp *Spec) { sp.Scope, sp.TTY = true, true }), Launch{Stdio: &[3]int{0, 1, 2}, TiePID: 99, Attach: &mfd}, f252},
	}
}

// writeProps writes props one a line: name, D-Bus signature, value.
func writeProps(b *strings.Builder, props []sd.Property) {
	for _, p := range props {
		fmt.Fprintf(b, "  %s %s %v\n", p.Name, p.Value.Signature(), p.Value.Value())
	}
}

// TestRenderGolden holds everything systemd is sent for each session of
// the table (the main unit's properties, its aux units', a run's tie
// scope, a scope's bwrap and init arguments) to what testdata/render.golden
// says: a change of how a session is rendered shows in its diff (go test
// -run TestRenderGolden ./units -update rewrites it). Its first line is
// the host's system directories as bwrap binds them, the one fact of the
// host in it: on a host whose differ the comparison is skipped.
func TestRenderGolden(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "system: %v\n", sandbox.Argv(sandbox.HostBinds(sandbox.Options{}), "/", nil))
	for _, tc := range goldenCases() {
		fmt.Fprintf(&b, "== %s (systemd %d)\n", tc.name, tc.f.Version)
		b.WriteString(renderGolden(tc.spec, tc.launch, tc.f))
	}
	got := b.String()
	path := filepath.Join("testdata", "render.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestRenderGolden ./units -update writes it)", err)
	}
	if first := func(s string) string { return s[:strings.IndexByte(s+"\n", '\n')] }; first(got) != first(string(want)) {
		t.Skipf("this host's system directories are not those the golden file was written on: %s", first(got))
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) && i < len(wl); i++ {
			if gl[i] != wl[i] {
				t.Fatalf("rendering changed at line %d:\n got %s\nwant %s\n(go test -run TestRenderGolden ./units -update, when intended)", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("rendering changed: %d lines, want %d", len(gl), len(wl))
	}
}

// renderGolden is what the start of spec with launch l sends on a manager
// of features f, as text (a scope's bwrap before it, the tie scope after).
func renderGolden(spec Spec, l Launch, f Features) string {
	var b strings.Builder
	if spec.Scope {
		l.InitPID = 4321
	} else {
		l.InitArgsFile = filepath.Join(spec.StateDir, "init-args")
	}
	r := Render(spec, l, f)
	b.WriteString(" main " + r.Unit + "\n")
	writeProps(&b, r.Properties)
	if spec.Scope {
		argv, initArgs := ScopeBwrap(spec)
		fmt.Fprintf(&b, "  bwrap %q\n  init %q\n", argv, initArgs)
	}
	for _, a := range r.Aux {
		b.WriteString(" aux " + a.Name + "\n")
		writeProps(&b, a.Properties)
	}
	if r.Tie != nil {
		b.WriteString(" tie " + r.Tie.Name + "\n")
		writeProps(&b, r.Tie.Properties)
	}
	return b.String()
}
