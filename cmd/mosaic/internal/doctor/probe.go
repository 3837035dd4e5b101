package doctor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"mosaic/manager"
	"mosaic/manager/request"
	"mosaic/sandbox"
	"mosaic/sandbox/escapes"
	"mosaic/units"
)

// ProbeAnswer is one check of `mosaic doctor --probe`: what a session could
// do against a stand-in that exists on the host.
type ProbeAnswer struct {
	Name string `json:"name"`
	What string `json:"what"`
	Want string `json:"want"` // allowed or denied
	Got  string `json:"got"`
	OK   bool   `json:"ok"`
	// Gap, in --sandbox landlock, says why the mode cannot deny this one.
	Gap string `json:"gap,omitempty"`
}

// probeChecks are the rows of the escape table the probe runs: those whose
// stand-ins it can make on any machine without touching the user's own
// directories (~/.ssh, ~/.aws, ~/.claude) or the user manager's
// environment (env-leak); the integration test runs them all.
var probeChecks = escapes.Named("home-file", "other-workspace", "other-state", "user-bus", "systemd-private", "systemd-run",
	"host-process", "host-shm", "host-sysv", "host-tmp", "write-outside", "write-usr", "host-cgroup", "host-loopback",
	"workspace-write", "tmp-write")

// ProbeSandbox starts a throwaway session (network none) against a fixture
// of stand-ins, each made on the host first so that a denial means the
// sandbox hid it, and reports each check. The fixture is removed afterwards.
// mode is the sandbox's inner layer: sandbox.ModeBwrap or ModeLandlock.
func ProbeSandbox(ctx context.Context, m *manager.Manager, mode string) ([]ProbeAnswer, error) {
	paths, err := m.Paths()
	if err != nil {
		return nil, err
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	id := hex.EncodeToString(r[:])
	var cleanup []func()
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}()
	stand, err := makeStandIns(paths, id, &cleanup)
	if err != nil {
		return nil, err
	}
	secretDir := stand.Outside

	out, err := os.CreateTemp("", "mosaic-probe-out-")
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { os.Remove(out.Name()) })
	defer out.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer null.Close()
	req := request.Request{Workspace: stand.Workspace, Network: sandbox.NetworkNone, Sandbox: mode, Own: true,
		Command: append([]string{"sh", "-c", escapes.Script(probeChecks), "sh"}, stand.Args()...)}
	plan, err := m.Plan(req)
	if err != nil {
		return nil, err
	}
	s, err := m.Run(ctx, plan, [3]int{int(null.Fd()), int(out.Fd()), int(out.Fd())}, nil)
	if err != nil {
		return nil, err
	}
	b, _ := os.ReadFile(out.Name())
	got := escapes.Parse(string(b))
	if s.ExitCode() != 0 || len(got) == 0 {
		return nil, fmt.Errorf("the probe session failed (%s): %s", s.How(), strings.TrimSpace(string(b)))
	}
	answers := answersOf(got, mode, m.Features())
	if _, err := os.Stat(filepath.Join(secretDir, "escaped")); err == nil {
		answers = append(answers, ProbeAnswer{Name: "write-outside-host", What: "a write outside the workspace reached the host", Want: "denied", Got: "allowed"})
	}
	return answers, nil
}

// makeStandIns makes what the probe's checks look for (a secret in the
// home, another workspace and session state, host /tmp, /dev/shm and SysV
// files, a host process, a loopback port), each removed by a function it
// adds to cleanup.
func makeStandIns(paths request.Paths, id string, cleanup *[]func()) (escapes.StandIns, error) {
	mk := func(dir, file string) error {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, file), []byte("mosaic probe stand-in\n"), 0o600)
	}
	secretDir := filepath.Join(paths.Home, ".mosaic-probe-"+id)
	otherWS := filepath.Join(paths.Home, ".mosaic-probe-other-"+id)
	otherState := paths.SessionDir("probe-other-" + id)
	work := filepath.Join(paths.Home, ".mosaic-probe-work-"+id)
	hostTmp := filepath.Join("/tmp", "mosaic-probe-"+id)
	shm := "mosaic-probe-" + id
	for _, p := range []string{secretDir, otherWS, otherState, work, hostTmp, filepath.Join("/dev/shm", shm)} {
		p := p
		*cleanup = append(*cleanup, func() { os.RemoveAll(p) })
	}
	for _, f := range []struct{ dir, file string }{
		{secretDir, "secret"}, {otherWS, "secret"}, {filepath.Join(otherState, "home"), "secret"}, {work, ".keep"},
		{"/tmp", filepath.Base(hostTmp)}, {"/dev/shm", shm},
	} {
		if err := mk(f.dir, f.file); err != nil {
			return escapes.StandIns{}, fmt.Errorf("cannot make the probe's stand-in in %s: %w", f.dir, err)
		}
	}
	var key [3]byte
	_, _ = rand.Read(key[:])
	sysvKey := int(key[0])<<16 | int(key[1])<<8 | int(key[2]) | 1
	if shmid, err := unix.SysvShmGet(sysvKey, 4096, unix.IPC_CREAT|unix.IPC_EXCL|0o600); err == nil {
		*cleanup = append(*cleanup, func() { _, _ = unix.SysvShmCtl(shmid, unix.IPC_RMID, nil) })
	} else {
		sysvKey = 0 // SysV IPC unavailable here: that check is skipped
	}
	// A host process whose command line carries a marker.
	marker := "mosaic-probe-host-" + id
	host := &exec.Cmd{Path: "/bin/sleep", Args: []string{marker, "300"}}
	if sleep, err := exec.LookPath("sleep"); err == nil {
		host.Path = sleep
	}
	if err := host.Start(); err != nil {
		return escapes.StandIns{}, fmt.Errorf("cannot start the probe's host process: %w", err)
	}
	*cleanup = append(*cleanup, func() { _ = host.Process.Kill(); _ = host.Wait() })

	port, lo, err := escapes.LoopbackStandIn()
	if err != nil {
		return escapes.StandIns{}, fmt.Errorf("cannot open the probe's loopback stand-in: %w", err)
	}
	*cleanup = append(*cleanup, func() { lo.Close() })
	stand := escapes.StandIns{HomeFile: filepath.Join(secretDir, "secret"), OtherWorkspace: otherWS, OtherState: otherState,
		RuntimeDir: paths.RuntimeDir, SHM: shm, HostTmp: hostTmp, Outside: secretDir, Marker: marker,
		LoopbackPort: port, Workspace: work}
	if sysvKey != 0 {
		stand.SysVKey = strconv.Itoa(sysvKey)
	}
	return stand, nil
}

// answersOf are the probe's answers from what its session said (got), each
// against what the mode must give (a --sandbox landlock session's known
// gaps are allowed, and say so).
func answersOf(got map[string]string, mode string, f units.Features) []ProbeAnswer {
	var answers []ProbeAnswer
	gaps := landlockGaps(f)
	for _, c := range probeChecks {
		g := got[c.Name]
		if g == "" {
			g = "no answer"
		}
		if g == escapes.Skipped {
			continue
		}
		a := ProbeAnswer{Name: c.Name, What: c.What, Want: c.Want, Got: g}
		if gap := gaps[c.Name]; mode == sandbox.ModeLandlock && gap != "" {
			a.Want, a.Gap = escapes.Allowed, gap
		}
		a.OK = a.Got == a.Want
		answers = append(answers, a)
	}
	return answers
}
