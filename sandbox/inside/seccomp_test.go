package inside

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"mosaic/sandbox"
	"mosaic/sandbox/syscallprobe"
)

// probeChildEnv makes the test binary a probing child: it installs the
// filter (lifting the rows the variable names; none at all for "host") and
// prints the probes. A child of its own also for the host's answers: a probe
// changes the persona of the process that makes it.
const probeChildEnv = "MOSAIC_TEST_SECCOMP_CHILD"

func TestMain(m *testing.M) {
	if allow, ok := os.LookupEnv(probeChildEnv); ok {
		if allow == "host" {
			syscallprobe.Main()
		}
		if err := InstallSyscallFilter(strings.Fields(allow)); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(3)
		}
		syscallprobe.Main()
	}
	os.Exit(m.Run())
}

func parseProbes(out string) map[string]string {
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if i := strings.LastIndex(l, " "); i > 0 {
			got[l[:i]] = l[i+1:]
		}
	}
	return got
}

func probeUnderFilter(t *testing.T, allow string) map[string]string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), probeChildEnv+"="+allow)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probing child: %v", err)
	}
	return parseProbes(string(out))
}

// TestSyscallFilter makes each denied call on the host (where the kernel
// answers it, EPERM only where it wants a privilege this process lacks) and
// under the filter, where every one gets EPERM and the calls nested
// sandboxes need still reach the kernel. A lifted row reaches it again.
func TestSyscallFilter(t *testing.T) {
	host := probeUnderFilter(t, "host")
	filtered := probeUnderFilter(t, "")
	reached := 0
	for _, p := range syscallprobe.Probes {
		if !syscallprobe.Denied(host[p.Name], filtered[p.Name]) {
			t.Errorf("%s (row %s) under the filter: %s, want EPERM", p.Name, p.Row, filtered[p.Name])
		}
		if host[p.Name] != "EPERM" && host[p.Name] != syscallprobe.NoEntryName {
			reached++
		}
		t.Logf("%-32s host %-8s filtered %s", p.Name, host[p.Name], filtered[p.Name])
	}
	// Unprivileged, the kernel itself refuses the module, kexec, reboot,
	// accounting, swap and clock calls with EPERM; the others must show
	// that the filter, not the kernel, said no.
	if reached < 15 {
		t.Errorf("only %d probes reached the kernel on the host: the probes prove nothing", reached)
	}
	for _, p := range syscallprobe.Allowed {
		if filtered[p.Name] != host[p.Name] {
			t.Errorf("%s: %s under the filter, %s on the host: the filter must let it through", p.Name, filtered[p.Name], host[p.Name])
		}
	}
	lifted := probeUnderFilter(t, "io_uring personality")
	for _, name := range []string{"io_uring_setup", "personality(ADDR_NO_RANDOMIZE)"} {
		if lifted[name] != host[name] || host[name] == "EPERM" {
			t.Errorf("%s with its row lifted: %s, host %s", name, lifted[name], host[name])
		}
	}
	if lifted["ioctl(TIOCSTI)"] != "EPERM" {
		t.Errorf("lifting other rows let TIOCSTI through")
	}
}

func TestSeccompAllowChecked(t *testing.T) {
	for _, tc := range []struct {
		names []string
		ok    bool
	}{
		{nil, true},
		{[]string{"io_uring", "perf"}, true},
		{[]string{"terminal-injection"}, false},
		{[]string{"nope"}, false},
	} {
		if err := sandbox.CheckSeccompAllow(tc.names); (err == nil) != tc.ok {
			t.Errorf("CheckSeccompAllow(%v) = %v", tc.names, err)
		}
	}
}

// TestSyscallRulesComplete: every row has a reason and every call it names
// has a number on some architecture mosaic supports (this one, or an
// x86_64-only call).
func TestSyscallRulesComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range sandbox.SyscallRules {
		if r.Reason == "" || r.Name == "" || seen[r.Name] || (r.Arg != nil) != (r.What != "") {
			t.Errorf("row %q: needs a unique name, a reason, and What exactly when Arg narrows it", r.Name)
		}
		seen[r.Name] = true
		for _, s := range r.Syscalls {
			if _, ok := syscallNumbers[s]; !ok && !x86Only[s] {
				t.Errorf("row %s: %s has no number", r.Name, s)
			}
		}
	}
	insns, err := SyscallFilter(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the filter has %d instructions", len(insns))
}

var x86Only = map[string]bool{"create_module": true, "get_kernel_syms": true, "query_module": true, "uselib": true, "ustat": true, "sysfs": true, "_sysctl": true, "iopl": true, "ioperm": true}

func BenchmarkSyscallFilterBuild(b *testing.B) {
	for b.Loop() {
		if _, err := SyscallFilter(nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSyscallUnderFilter is the cost the filter adds to every system
// call: run it with MOSAIC_TEST_FILTERED=1 to measure under the filter
// (it installs the filter in the benchmark process and cannot be undone).
func BenchmarkSyscallUnderFilter(b *testing.B) {
	if os.Getenv("MOSAIC_TEST_FILTERED") == "1" {
		if err := InstallSyscallFilter(nil); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		unix.Getppid()
	}
}
