package inside

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"mosaic/sandbox"
)

// needLandlock skips where the kernel lacks the scoping (CI's kernel has it:
// there the test must run).
func needLandlock(t *testing.T) {
	t.Helper()
	if abi := sandbox.LandlockABI(); abi < sandbox.LandlockMinABI {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI's kernel must offer Landlock ABI %d, has %d", sandbox.LandlockMinABI, abi)
		}
		t.Skipf("the kernel offers Landlock ABI %d, the scoping needs %d", abi, sandbox.LandlockMinABI)
	}
}

// runIn runs sh -c script in ruleset r (built by make, nil: none) and
// returns its exit status.
func runIn(t *testing.T, make func() (*LandlockRuleset, error), script string) int {
	t.Helper()
	r, err := make()
	if err != nil {
		t.Fatal(err)
	}
	null, _ := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	defer null.Close()
	p, err := StartRestricted(r, "/bin/sh", []string{"sh", "-c", script}, &os.ProcAttr{Env: []string{"PATH=" + sandbox.DefaultPath}, Files: []*os.File{null, null, null}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return st.ExitCode()
}

func unrestricted() (*LandlockRuleset, error) { return nil, nil }

// TestScopeRuleset: a command started in the scoping ruleset cannot signal
// a process outside it nor connect to an abstract socket made outside it,
// which the same command can unrestricted; it still signals its own
// children; and the caller itself stays unrestricted.
func TestScopeRuleset(t *testing.T) {
	needLandlock(t)
	outside := exec.Command("sleep", "300")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { outside.Process.Kill(); outside.Wait() }()
	name := "mosaic-landlock-test-" + strconv.Itoa(os.Getpid())
	l, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if _, err := exec.LookPath("socat"); err != nil {
		t.Fatal("socat is needed (apt-get install socat)")
	}
	signal := "kill -0 " + strconv.Itoa(outside.Process.Pid)
	abstract := "socat -u ABSTRACT-CONNECT:" + name + " -"
	for _, c := range []struct {
		script string
		want   bool // reachable inside the scope
	}{{signal, false}, {abstract, false}, {"sleep 30 & kill $!", true}} {
		if got := runIn(t, unrestricted, c.script); got != 0 {
			t.Fatalf("%q fails without Landlock (exit %d): the stand-in is not there", c.script, got)
		}
		if got := runIn(t, ScopeRuleset, c.script); (got == 0) != c.want {
			t.Errorf("%q in the scope: exit %d, want success %v", c.script, got, c.want)
		}
	}
	// The thread that restricted itself is gone: every thread of this
	// process still reaches the abstract socket.
	for i := 0; i < 20; i++ {
		c, err := net.Dial("unix", "@"+name)
		if err != nil {
			t.Fatalf("the caller was restricted too: %v", err)
		}
		c.Close()
	}
}

// TestLandlockPolicy: a command under a --sandbox landlock policy reads and
// writes where the policy says and nowhere else, and connects nowhere with
// network none.
func TestLandlockPolicy(t *testing.T) {
	needLandlock(t)
	ws, other := t.TempDir(), t.TempDir()
	secret := filepath.Join(other, "secret")
	if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	lo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Close()
	_, port, _ := net.SplitHostPort(lo.Addr().String())
	for _, c := range []struct {
		network, script string
		want            bool
	}{
		{sandbox.NetworkNone, "cat " + secret, false},
		{sandbox.NetworkNone, "mktemp -p " + other, false},
		{sandbox.NetworkNone, "ls /sys/kernel", false},
		{sandbox.NetworkNone, "echo x > " + ws + "/written && cat " + ws + "/written", true},
		{sandbox.NetworkNone, "ls /usr/bin >/dev/null && cat /etc/passwd >/dev/null", true},
		{sandbox.NetworkNone, "exec 3<>/dev/tcp/127.0.0.1/" + port, false},
		{sandbox.NetworkHost, "exec 3<>/dev/tcp/127.0.0.1/" + port, true},
	} {
		policy := sandbox.LandlockPolicyFor(sandbox.LandlockOptions{Workspace: ws, SessionHome: ws, Network: c.network})
		policy.Write = []string{ws} // not /tmp, which holds the stand-ins here
		if c.want == false && runIn(t, unrestricted, "bash -c '"+c.script+"'") != 0 {
			t.Fatalf("%q fails without Landlock: the stand-in is not there", c.script)
		}
		if got := runIn(t, rulesetOf(policy), "bash -c '"+c.script+"'"); (got == 0) != c.want {
			t.Errorf("network %s, %q: exit %d, want success %v", c.network, c.script, got, c.want)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(other, "tmp.*")); len(m) != 1 { // the one made unrestricted
		t.Errorf("a write outside the policy reached the disk: %v", m)
	}
}

// TestNestedSandbox: a bwrap started in the scoping ruleset builds its
// sandbox (the agents' own sandboxes keep working in every session), while
// one under a ruleset that handles filesystem access cannot mount: why the
// scoping handles none.
func TestNestedSandbox(t *testing.T) {
	needLandlock(t)
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal("bwrap is needed (apt-get install bubblewrap)")
	}
	nested := bwrap + " --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 --proc /proc --dev /dev --unshare-all --die-with-parent -- /usr/bin/true"
	if got := runIn(t, unrestricted, nested); got != 0 {
		t.Fatalf("bwrap fails without Landlock (exit %d): the host cannot run it", got)
	}
	if got := runIn(t, ScopeRuleset, nested); got != 0 {
		t.Errorf("bwrap in the scoping ruleset: exit %d, want 0", got)
	}
	policy := sandbox.LandlockPolicyFor(sandbox.LandlockOptions{Workspace: t.TempDir(), SessionHome: t.TempDir(), Network: sandbox.NetworkHost})
	if got := runIn(t, rulesetOf(policy), nested); got == 0 {
		t.Error("bwrap under a filesystem ruleset built its sandbox: the reason the scoping handles no filesystem access is gone")
	}
}

// BenchmarkStartCommand is what the init's start of the command costs
// plain, in the scoping ruleset, and under a --sandbox landlock policy
// (ruleset built, thread locked and restricted, fork, exec, wait).
func BenchmarkStartCommand(b *testing.B) {
	if sandbox.LandlockABI() < sandbox.LandlockMinABI {
		b.Skip("the kernel lacks Landlock ABI 6")
	}
	ws := b.TempDir()
	policy := sandbox.LandlockPolicyFor(sandbox.LandlockOptions{Workspace: ws, SessionHome: ws, Network: sandbox.NetworkNone})
	for _, c := range []struct {
		name string
		make func() (*LandlockRuleset, error)
	}{{"plain", unrestricted}, {"scoped", ScopeRuleset}, {"landlock-policy", rulesetOf(policy)}} {
		b.Run(c.name, func(b *testing.B) {
			null, _ := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			defer null.Close()
			for i := 0; i < b.N; i++ {
				r, err := c.make()
				if err != nil {
					b.Fatal(err)
				}
				p, err := StartRestricted(r, "/usr/bin/true", []string{"true"}, &os.ProcAttr{Files: []*os.File{null, null, null}})
				if err != nil {
					b.Fatal(err)
				}
				p.Wait()
			}
		})
	}
}

// rulesetOf is policyRuleset of p, to be called later (runIn).
func rulesetOf(p sandbox.LandlockPolicy) func() (*LandlockRuleset, error) {
	return func() (*LandlockRuleset, error) { return policyRuleset(p) }
}
