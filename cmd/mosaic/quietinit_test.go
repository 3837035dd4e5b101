package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"mosaic/sandbox/syscallprobe"
)

// Issue 13, items 4 and 5: what the session's init was given, and the
// kernel's attack surface. Each attack is first made against a build whose
// defences are off (-tags mosaic_weakened, a build only tests make), where
// it must work, then against mosaic, where it must fail.

// weakenedMosaic is mosaic with the init dumpable, the shim passing the
// unit's whole environment to bwrap, no syscall filter and no Landlock
// scoping (-tags mosaic_weakened).
func weakenedMosaic(t *testing.T) string { return taggedMosaic(t, "mosaic_weakened") }

func mosaicAs(t *testing.T, bin string, args ...string) result {
	t.Helper()
	return runResult(t, exec.Command(bin, args...))
}

// probeInWorkspace copies this test binary into ws, where a session can run
// it (its probe- modes, see probeMain).
func probeInWorkspace(t *testing.T, ws string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := filepath.Join(ws, "probe")
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, src); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// probeMain is this test binary run inside a session:
//
//	probe-pid1 HALF1 HALF2 [OUT]  what the command can learn from PID 1, and
//	                              whether HALF1+HALF2 is in any environ
//	probe-syscalls                syscallprobe's calls, and TIOCSTI on stdin
//
// The marker comes in halves so that no command line holds it.
func probeMain(mode string, args []string) int {
	var b strings.Builder
	switch mode {
	case "probe-pid1":
		if len(args) < 2 {
			return 2
		}
		secret := []byte(args[0] + args[1])
		answer := func(what string, err error) {
			if err != nil {
				fmt.Fprintf(&b, "%s denied\n", what)
			} else {
				fmt.Fprintf(&b, "%s allowed\n", what)
			}
		}
		_, err := os.ReadFile("/proc/1/environ")
		answer("environ", err)
		mem, err := os.Open("/proc/1/mem")
		if err == nil {
			mem.Close()
		}
		answer("mem", err)
		answer("ptrace", unix.PtraceSeize(1)) // the tracer's exit detaches it
		found := "none"
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			if env, err := os.ReadFile(d + "/environ"); err == nil && bytes.Contains(env, secret) {
				found = filepath.Base(d)
			}
		}
		fmt.Fprintf(&b, "leak %s\n", found)
		if len(args) > 2 {
			if err := os.WriteFile(args[2], []byte(b.String()), 0o644); err != nil {
				return 1
			}
			time.Sleep(5 * time.Minute)
			return 0
		}
	case "probe-syscalls":
		b.WriteString(syscallprobe.Run(syscallprobe.Probes) + syscallprobe.Run(syscallprobe.Allowed))
		if _, err := unix.IoctlGetTermios(0, unix.TCGETS); err == nil {
			c := byte('\n') // a newline, pushed into the session's own terminal: harmless
			_, _, e := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
			fmt.Fprintf(&b, "tiocsti-stdin %s\n", syscallprobe.Name(e))
		}
	case "probe-ldisc": // OUT exit|wait: N_NULL on stdin, then OUT says what stdin's modes were
		if len(args) < 2 {
			return 2
		}
		echo := "echo-unknown"
		if tio, err := unix.IoctlGetTermios(0, unix.TCGETS); err == nil && tio.Lflag&unix.ECHO == 0 {
			echo = "echo-off"
		}
		if err := unix.IoctlSetPointerInt(0, unix.TIOCSETD, nNull); err != nil {
			fmt.Fprintf(os.Stderr, "TIOCSETD N_NULL: %v\n", err)
			return 1
		}
		if err := os.WriteFile(args[0], []byte(echo+"\n"), 0o644); err != nil {
			return 1
		}
		if args[1] == "wait" {
			time.Sleep(5 * time.Minute)
		}
		return 0
	default:
		return 2
	}
	fmt.Print(b.String())
	return 0
}

func answers(out string) map[string]string {
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(strings.ReplaceAll(out, "\r", "")), "\n") {
		if i := strings.LastIndex(l, " "); i > 0 {
			got[l[:i]] = l[i+1:]
		}
	}
	return got
}

// unitEnvirons reads, from the host, the initial environment of every
// process of a unit whose environment the host may read: not the init's
// once it is non-dumpable (unreadable counts those). bwrap's monitor holds
// the environment bwrap started the init with.
func unitEnvirons(t *testing.T, unit string) (envs map[string][]byte, unreadable int) {
	t.Helper()
	cg := unitProperty(t, unit, "ControlGroup")
	var procs []byte
	for _, root := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if b, err := os.ReadFile(filepath.Join(root, cg, "cgroup.procs")); err == nil {
			procs = b
			break
		}
	}
	envs = map[string][]byte{}
	for _, pid := range strings.Fields(string(procs)) {
		env, err := os.ReadFile("/proc/" + pid + "/environ")
		if os.IsPermission(err) {
			unreadable++
			continue
		}
		if err != nil {
			t.Fatalf("reading the environment of %s's process %s from the host: %v", unit, pid, err)
		}
		envs[pid] = env
	}
	if len(envs)+unreadable != 3 {
		t.Fatalf("%s has processes %q: want three, bwrap (once the shim), the init and the command", unit, procs)
	}
	return envs, unreadable
}

// TestInitQuiet: a session cannot read the init's environment or memory,
// cannot trace it, and finds what the user manager holds for every unit
// (systemctl --user set-environment) in no process of the sandbox, the
// init's initial environment and bwrap's included.
func TestInitQuiet(t *testing.T) {
	needRig(t)
	weak := weakenedMosaic(t)
	secret := "secret-x-" + randomHex() + randomHex()
	systemctl(t, "set-environment", "SECRET_X="+secret)
	t.Cleanup(func() { systemctl(t, "unset-environment", "SECRET_X") })
	if !strings.Contains(systemctl(t, "show-environment"), "SECRET_X="+secret) {
		t.Fatal("the user manager does not hold SECRET_X")
	}
	half := len(secret) / 2
	for _, tc := range []struct {
		label, bin string
		want       string
	}{
		{"weakened", weak, "allowed"},
		{"mosaic", mosaicBin, "denied"},
	} {
		t.Run(tc.label+"-service", func(t *testing.T) {
			ws := workspace(t)
			probe := probeInWorkspace(t, ws)
			name := sessionName(t)
			out := filepath.Join(ws, "probe.out")
			// Network none: no mosaic-net beside the init (its environment
			// is the one variable the init gives it, see sandbox.startNet).
			r := mosaicAs(t, tc.bin, "start", "--direct", "--network", "none", "--name", name, "-w", ws, "--", probe, "probe-pid1", secret[:half], secret[half:], out)
			if r.code != 0 {
				t.Fatalf("start: exit %d: %s", r.code, r.stderr)
			}
			eventually(t, 10*time.Second, "the probe's answers", func() bool {
				b, err := os.ReadFile(out)
				return err == nil && strings.Contains(string(b), "leak ")
			})
			b, _ := os.ReadFile(out)
			got := answers(string(b))
			for _, what := range []string{"environ", "mem", "ptrace"} {
				if got[what] != tc.want {
					t.Errorf("%s of PID 1 from inside: %s, want %s", what, got[what], tc.want)
				}
			}
			if tc.want == "allowed" && got["leak"] == "none" {
				t.Errorf("the weakened session found SECRET_X in no environ: the probe proves nothing")
			}
			if tc.want == "denied" && got["leak"] != "none" {
				t.Errorf("SECRET_X is in the environ of PID %s inside", got["leak"])
			}
			envs, unreadable := unitEnvirons(t, "mosaic-"+name+".service")
			if want := map[string]int{"allowed": 0, "denied": 1}[tc.want]; unreadable != want {
				t.Errorf("%d processes of the unit are non-dumpable, want %d (the init)", unreadable, want)
			}
			leaked := 0
			for pid, env := range envs {
				if bytes.Contains(env, []byte(secret)) {
					leaked++
					t.Logf("process %s of the unit holds SECRET_X", pid)
				}
			}
			if (leaked > 0) != (tc.want == "allowed") {
				t.Errorf("%d processes of the unit hold SECRET_X in their initial environment", leaked)
			}
			mosaicAs(t, tc.bin, "stop", "--timeout", "2s", name)
		})
		t.Run(tc.label+"-scope", func(t *testing.T) {
			ws := workspace(t)
			probe := probeInWorkspace(t, ws)
			r := mosaicAs(t, tc.bin, "run", "--scope", "--direct", "-w", ws, "--", probe, "probe-pid1", secret[:half], secret[half:])
			if r.code != 0 {
				t.Fatalf("run --scope: exit %d: %s", r.code, r.stderr)
			}
			got := answers(r.stdout)
			for _, what := range []string{"environ", "mem", "ptrace"} {
				if got[what] != tc.want {
					t.Errorf("%s of PID 1 from inside a scope: %s, want %s", what, got[what], tc.want)
				}
			}
		})
	}
}

// TestSyscallFilterInSession: every call the filter denies reaches the
// kernel on the host and in a weakened session, and gets EPERM in a
// session; TIOCSTI on the session's own terminal is refused; the calls a
// nested sandbox needs still work, and so does bwrap inside a session.
func TestSyscallFilterInSession(t *testing.T) {
	needRig(t)
	weak := weakenedMosaic(t)
	ws := workspace(t)
	probe := probeInWorkspace(t, ws)
	hostOut, err := exec.Command(probe, "probe-syscalls").Output()
	if err != nil {
		t.Fatalf("probing on the host: %v", err)
	}
	host := answers(string(hostOut))
	inSession := func(bin string) map[string]string {
		t.Helper()
		r := mosaicAs(t, bin, "run", "-w", ws, "--", probe, "probe-syscalls")
		if r.code != 0 {
			t.Fatalf("probing in a session: exit %d: %s", r.code, r.stderr)
		}
		return answers(r.stdout)
	}
	weakened, filtered := inSession(weak), inSession(mosaicBin)
	reached := 0
	for _, p := range syscallprobe.Probes {
		if host[p.Name] != "EPERM" && host[p.Name] != syscallprobe.NoEntryName {
			reached++
			if weakened[p.Name] == "EPERM" {
				t.Errorf("%s: EPERM in a weakened session but %s on the host: the probe cannot tell the filter", p.Name, host[p.Name])
			}
		}
		if !syscallprobe.Denied(host[p.Name], filtered[p.Name]) {
			t.Errorf("%s (row %s) in a session: %s, want EPERM (host %s)", p.Name, p.Row, filtered[p.Name], host[p.Name])
		}
	}
	if reached < 15 {
		t.Errorf("only %d probes reached the kernel on the host: the probes prove nothing", reached)
	}
	for _, p := range syscallprobe.Allowed {
		if filtered[p.Name] != weakened[p.Name] {
			t.Errorf("%s: %s in a session, %s without the filter: it must pass", p.Name, filtered[p.Name], weakened[p.Name])
		}
	}

	t.Run("tiocsti", func(t *testing.T) {
		for _, tc := range []struct{ bin, want string }{{weak, "0"}, {mosaicBin, "EPERM"}} {
			r := startOnPTYAs(t, tc.bin, 24, 80, "run", "--pty", "-w", ws, "--", probe, "probe-syscalls")
			select {
			case <-r.exited:
			case <-time.After(30 * time.Second):
				t.Fatal("mosaic run --pty did not end")
			}
			if got := answers(r.output())["tiocsti-stdin"]; got != tc.want {
				t.Errorf("%s: TIOCSTI on the session's terminal: %q, want %s", filepath.Base(tc.bin), got, tc.want)
			}
		}
	})

	t.Run("nested-bwrap", func(t *testing.T) {
		bwrap, err := exec.LookPath("bwrap")
		if err != nil {
			t.Fatal(err)
		}
		nested := []string{bwrap, "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
			"--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--unshare-all", "--die-with-parent", "--", "/usr/bin/true"}
		r := mosaic(t, append([]string{"run", "-w", ws, "--"}, nested...)...)
		if r.code == 137 {
			// Seen in full runs only (never alone): the nested bwrap killed
			// by SIGKILL from outside within 0.2 s, source not yet found. It
			// is said, and the check is made once more; a second kill fails.
			t.Logf("bwrap inside a session was SIGKILLed from outside (exit 137); trying once more")
			r = mosaic(t, append([]string{"run", "-w", ws, "--"}, nested...)...)
		}
		if r.code != 0 {
			t.Errorf("bwrap inside a session: exit %d: %s%s", r.code, r.stdout, r.stderr)
		}
		r = mosaic(t, "run", "-w", ws, "--", "unshare", "--user", "--map-root-user", "--mount", "--pid", "--fork", "true")
		if r.code != 0 {
			t.Errorf("unshare inside a session: exit %d: %s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// TestSeccompAllowProfile: a profile's SeccompAllow= lifts its rows for its
// sessions (and status says so), an unknown or fixed row is refused as bad
// input before anything starts.
func TestSeccompAllowProfile(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	probe := probeInWorkspace(t, ws)
	dir := filepath.Join(configDir(), "mosaic", "profiles")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	profile := func(line string) string {
		name := "seccomp-" + randomHex()
		path := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(path, []byte("[Profile]\n"+line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(path) })
		return name
	}
	lifted := profile("SeccompAllow=io_uring perf")
	name := sessionName(t)
	r := mosaic(t, "run", "--name", name, "--profile", lifted, "-w", ws, "--", probe, "probe-syscalls")
	if r.code != 0 {
		t.Fatalf("run with a lifting profile: exit %d: %s", r.code, r.stderr)
	}
	got := answers(r.stdout)
	for _, c := range []string{"io_uring_setup", "perf_event_open"} {
		if got[c] == "EPERM" {
			t.Errorf("%s: EPERM with its row lifted", c)
		}
	}
	if got["bpf"] != "EPERM" {
		t.Errorf("bpf: %s, want EPERM (its row was not lifted)", got["bpf"])
	}
	if s := mustMosaic(t, "status", name).stdout; !strings.Contains(s, "every row but io_uring, perf") {
		t.Errorf("status does not say which rows were lifted:\n%s", s)
	}
	for _, line := range []string{"SeccompAllow=nope", "SeccompAllow=terminal-injection"} {
		r := mosaic(t, "run", "--json", "--profile", profile(line), "-w", ws, "--", "true")
		if code, _ := jsonError(t, r); r.code != 2 || code != "bad-profile" {
			t.Errorf("%s: exit %d code %q, want 2 bad-profile", line, r.code, code)
		}
	}
}
