package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"mosaic/sandbox"
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

// probeScript runs inside the throwaway session; each line answers one
// check. Its arguments are the stand-ins' paths.
const probeScript = `
secret=$1 other_ws=$2 other_state=$3 rt=$4 host_tmp=$5 shm=$6 host_pid=$7 outside=$8 ws=$9; shift 9
port=$1
c() { n=$1; shift; if "$@" >/dev/null 2>&1; then echo "$n allowed"; else echo "$n denied"; fi; }
c home-secret cat "$secret"
c other-workspace cat "$other_ws/file"
c other-state cat "$other_state/home/file"
c user-bus test -e "$rt/bus"
c systemd-socket test -e "$rt/systemd/private"
c systemd-run timeout 5 systemd-run --user --wait true
c host-process test -e "/proc/$host_pid"
c host-tmp test -e "$host_tmp"
c host-shm test -e "/dev/shm/$shm"
c write-outside touch "$outside/escaped"
c write-system touch /usr/mosaic-probe
c cgroup-tree test -e /sys/fs/cgroup
c workspace-write touch "$ws/written"
c tmp-write touch /tmp/written
c host-loopback timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port"
`

var probeChecks = []struct{ name, what, want string }{
	{"home-secret", "a file in your real home (like ~/.ssh)", "denied"},
	{"other-workspace", "another session's workspace", "denied"},
	{"other-state", "another session's home", "denied"},
	{"user-bus", "the user bus socket", "denied"},
	{"systemd-socket", "systemd's private socket", "denied"},
	{"systemd-run", "starting a unit with systemd-run --user", "denied"},
	{"host-process", "a host process in /proc", "denied"},
	{"host-tmp", "a file in the host's /tmp", "denied"},
	{"host-shm", "a file in the host's /dev/shm", "denied"},
	{"write-outside", "writing outside the workspace", "denied"},
	{"write-system", "writing to /usr", "denied"},
	{"cgroup-tree", "the cgroup tree", "denied"},
	{"workspace-write", "writing the workspace", "allowed"},
	{"tmp-write", "writing its own /tmp", "allowed"},
	{"host-loopback", "a service on the host's 127.0.0.1 (its network namespace, with the host's abstract sockets)", "denied"},
}

// ProbeSandbox starts a throwaway session against a fixture of stand-ins
// (each made on the host first, so that a denial means the sandbox hid it),
// and reports each check. The fixture is removed afterwards.
func (m *Manager) ProbeSandbox(ctx context.Context) ([]ProbeAnswer, error) {
	return m.ProbeMode(ctx, sandbox.ModeBwrap)
}

// ProbeMode is ProbeSandbox in sandbox mode mode (bwrap or landlock).
func (m *Manager) ProbeMode(ctx context.Context, mode string) ([]ProbeAnswer, error) {
	paths, err := UserPaths()
	if err != nil {
		return nil, err
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	id := hex.EncodeToString(r[:])
	var cleanup []string
	defer func() {
		for _, p := range cleanup {
			os.RemoveAll(p)
		}
	}()
	mk := func(dir, file string) (string, error) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", err
		}
		return dir, os.WriteFile(filepath.Join(dir, file), []byte("mosaic probe stand-in\n"), 0o600)
	}
	secretDir := filepath.Join(paths.Home, ".mosaic-probe-"+id)
	otherWS := filepath.Join(paths.Home, ".mosaic-probe-other-"+id)
	otherState := paths.SessionDir("probe-other-" + id)
	work := filepath.Join(paths.Home, ".mosaic-probe-work-"+id)
	hostTmp := filepath.Join("/tmp", "mosaic-probe-"+id)
	shm := "mosaic-probe-" + id
	cleanup = append(cleanup, secretDir, otherWS, otherState, work, hostTmp, filepath.Join("/dev/shm", shm))
	for _, f := range []struct{ dir, file string }{
		{secretDir, "secret"}, {otherWS, "file"}, {filepath.Join(otherState, "home"), "file"}, {work, ".keep"},
		{"/tmp", filepath.Base(hostTmp)}, {"/dev/shm", shm},
	} {
		if _, err := mk(f.dir, f.file); err != nil {
			return nil, fmt.Errorf("cannot make the probe's stand-in in %s: %v", f.dir, err)
		}
	}
	out, err := os.CreateTemp("", "mosaic-probe-out-")
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, out.Name())
	defer out.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer null.Close()

	lo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cannot open the probe's loopback stand-in: %v", err)
	}
	defer lo.Close()
	go func() {
		for {
			c, err := lo.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(lo.Addr().String())
	req := Request{Workspace: work, Network: sandbox.NetworkNone, Sandbox: mode, Command: []string{"sh", "-c", probeScript, "sh",
		filepath.Join(secretDir, "secret"), otherWS, otherState, paths.RuntimeDir, hostTmp, shm,
		strconv.Itoa(os.Getpid()), secretDir, work, port}}
	spec, secrets, err := m.Spec(req)
	if err != nil {
		return nil, err
	}
	s, err := m.Run(ctx, spec, secrets, [3]int{int(null.Fd()), int(out.Fd()), int(out.Fd())}, nil)
	if err != nil {
		return nil, err
	}
	b, _ := os.ReadFile(out.Name())
	got := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			got[k] = v
		}
	}
	if s.ExitCode() != 0 || len(got) == 0 {
		return nil, fmt.Errorf("the probe session failed (%s): %s", s.How(), strings.TrimSpace(string(b)))
	}
	var answers []ProbeAnswer
	for _, c := range probeChecks {
		g := got[c.name]
		if g == "" {
			g = "no answer"
		}
		a := ProbeAnswer{Name: c.name, What: c.what, Want: c.want, Got: g}
		if gap := landlockGaps[c.name]; mode == sandbox.ModeLandlock && gap != "" {
			a.Want, a.Gap = "allowed", gap
		}
		a.OK = a.Got == a.Want
		answers = append(answers, a)
	}
	if _, err := os.Stat(filepath.Join(secretDir, "escaped")); err == nil {
		answers = append(answers, ProbeAnswer{Name: "write-outside-host", What: "a write outside the workspace reached the host", Want: "denied", Got: "allowed"})
	}
	return answers, nil
}
