package units

import (
	"slices"
	"strings"
	"testing"

	"mosaic/sandbox"
)

// TestPropertiesLandlock: a --sandbox landlock session's unit runs the
// shim, then mosaic's init with the session's policy (no bwrap anywhere),
// covers /sys and /dev/shm besides the home and the runtime dir (and the
// cgroup tree of the sysfs systemd 257 mounts), and keeps every property of
// systemd's layer, PrivatePIDs included where the manager has it.
func TestPropertiesLandlock(t *testing.T) {
	s := testSpec()
	s.Sandbox, s.BwrapBin, s.Network = sandbox.ModeLandlock, "", sandbox.NetworkNone
	p := props(Render(s, Launch{}, FeaturesFor(252)).Properties)
	argv := p["ExecStartEx"].Value.Value().([]execEx)[0].Argv
	if strings.Join(argv[:5], " ") != s.StageBin+" exec-bwrap --promise "+s.Promise.Encode()+" "+s.StageBin || argv[5] != "init" {
		t.Errorf("ExecStart starts %v, want the shim, then mosaic's init", argv[:6])
	}
	for _, a := range argv {
		if strings.Contains(a, "bwrap") && a != "exec-bwrap" {
			t.Errorf("bwrap in a landlock session's command line: %v", argv)
		}
	}
	i := slices.Index(argv, "--landlock")
	if i < 0 {
		t.Fatalf("no --landlock policy: %v", argv)
	}
	pol, err := sandbox.DecodeLandlockPolicy(argv[i+1])
	if err != nil || pol.Network != sandbox.NetworkNone || !slices.Contains(pol.Write, s.Workspace) || !slices.Contains(pol.Write, s.SessionHome()) ||
		!slices.Contains(pol.Write, "/srv/cache") || !slices.Contains(pol.Exec, "/opt/data") || slices.Contains(pol.Write, s.StateDir) {
		t.Errorf("policy %+v (%v): want workspace, own home, --rw written, --ro read, not the state dir", pol, err)
	}
	if h := slices.Index(argv, "--home"); h < 0 || argv[h+1] != s.SessionHome() {
		t.Errorf("HOME inside is not the session's own home: %v", argv)
	}
	var tmpfs []string
	for _, e := range p["TemporaryFileSystem"].Value.Value().([]tmpfsEntry) {
		tmpfs = append(tmpfs, e.Path)
	}
	if strings.Join(tmpfs, " ") != s.Home+" "+s.RuntimeDir+" /run /sys /dev/shm" {
		t.Errorf("TemporaryFileSystem = %v", tmpfs)
	}
	for _, b := range p["BindReadOnlyPaths"].Value.Value().([]bindEntry) {
		if b.Src == "" {
			t.Errorf("an empty read-only bind (the absent bwrap): %v", b)
		}
	}
	if p["NotifyAccess"].Value.Value() != "main" {
		t.Errorf("NotifyAccess = %v, want main: the command can reach the socket", p["NotifyAccess"].Value)
	}
	for _, b := range []string{"PrivateUsers", "PrivateTmp", "NoNewPrivileges", "PrivateNetwork"} {
		if p[b].Value.Value() != true {
			t.Errorf("%s is not true", b)
		}
	}
	if v, ok := p["InaccessiblePaths"]; !ok || !slices.Equal(v.Value.Value().([]string), []string{"-/sys/fs/cgroup"}) || v.Value.Signature().String() != "as" {
		t.Errorf("InaccessiblePaths = %v, want the cgroup tree's mount point (systemd 257 mounts a sysfs with it)", v.Value)
	}
	if _, ok := props(Render(s, Launch{}, FeaturesFor(257)).Properties)["PrivatePIDs"]; !ok {
		t.Error("PrivatePIDs not sent to a 257 manager for a landlock session: it has no PID namespace otherwise")
	}
}
