package main

// mosaic gates features on the user manager's version (PrivatePIDs from 257,
// PrivateUsers implied from 254), and make test runs every test on two:
// the host's systemd 252 and 257 in a Debian 13 root (contrib/rig.sh --root).
// These tests show each gate where it takes effect, on whichever they meet.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// managerVersion is the major version of the user manager the tests run
// against, from its Version property (e.g. "257.13-1~deb13u1").
func managerVersion(t *testing.T) int {
	t.Helper()
	v := systemctl(t, "show", "-P", "Version")
	n, err := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	if err != nil {
		t.Fatalf("cannot read the user manager's version from %q", v)
	}
	return n
}

// TestRigBootsTheVersionItNames: the rig says which systemd it booted
// (MOSAIC_RIG_SYSTEMD), and that is the manager the tests talk to, so a
// failure's version is the right one.
func TestRigBootsTheVersionItNames(t *testing.T) {
	needRig(t)
	t.Parallel()
	rig := os.Getenv("MOSAIC_RIG_SYSTEMD")
	if rig == "" {
		t.Skip("not inside contrib/rig.sh (the user's own manager)")
	}
	if got := strconv.Itoa(managerVersion(t)); got != rig {
		t.Errorf("the rig says systemd %s, the manager is %s", rig, got)
	}
}

// TestFeatureGates: a session's unit, as systemctl shows it, has PrivatePIDs
// (and PrivateUsersEx=self) exactly where the manager has them (257+), and
// PrivateUsers everywhere (a 252 user manager needs it for any mount
// namespace; mosaic sets it also where it is implied). PrivatePIDs is also
// shown to take effect: the unit's main process is PID 1 of a namespace of
// its own.
func TestFeatureGates(t *testing.T) {
	needRig(t)
	t.Parallel()
	v := managerVersion(t)
	name := sessionName(t)
	s := decode[sessionDoc](t, mustMosaic(t, "start", "--json", "--name", name, "--workspace", workspace(t), "--", "sleep", "300").stdout)
	props := map[string]string{}
	for _, line := range strings.Split(systemctl(t, "show", "-p", "PrivatePIDs", "-p", "PrivateUsers", "-p", "PrivateUsersEx", s.Unit), "\n") {
		if k, val, ok := strings.Cut(line, "="); ok {
			props[k] = val
		}
	}
	want := map[string]string{"PrivateUsers": "yes"}
	if v >= 257 {
		want["PrivatePIDs"] = "yes"
		want["PrivateUsersEx"] = "self"
	}
	if fmt.Sprint(props) != fmt.Sprint(want) {
		t.Errorf("systemd %d: systemctl --user show %s: %v, want %v", v, s.Unit, props, want)
	}

	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(int(s.MainPID)), "status"))
	if err != nil {
		t.Fatal(err)
	}
	var nspid []string
	for _, line := range strings.Split(string(status), "\n") {
		if f, ok := strings.CutPrefix(line, "NSpid:"); ok {
			nspid = strings.Fields(f)
		}
	}
	own := len(nspid) == 2 && nspid[1] == "1"
	if own != (v >= 257) || (!own && len(nspid) != 1) {
		t.Errorf("systemd %d: the main process's PIDs by namespace are %v; want it PID 1 of a namespace of its own exactly on 257+", v, nspid)
	}
}

// TestDoctorNamesTheVersion: doctor reports the manager's version and what
// it gates, as they are.
func TestDoctorNamesTheVersion(t *testing.T) {
	needRig(t)
	t.Parallel()
	v := managerVersion(t)
	d, code := runDoctor(t, nil)
	if code != 0 {
		t.Fatalf("doctor: exit %d", code)
	}
	yes := map[bool]string{true: "yes", false: "no"}
	want := []string{fmt.Sprintf("%d: PrivatePIDs %s", v, yes[v >= 257]), "PrivateUsers implied " + yes[v >= 254]}
	for _, c := range d.Checks {
		if c.Name != "systemd-version" {
			continue
		}
		for _, w := range want {
			if c.Status != "ok" || !strings.Contains(c.Detail, w) {
				t.Errorf("doctor's systemd-version: %s %q, want ok with %q", c.Status, c.Detail, w)
			}
		}
		return
	}
	t.Error("doctor has no systemd-version check")
}

// TestRigTestNetworkShadowsNothing: the rig's test network takes no range
// that holds an address of the machine, of /etc/hosts, of a nameserver or
// of what its registries resolve to, or that a route other than the default
// overlaps, however wide (a /15 covers the /24s inside it). pick-testnet is
// fed a machine from files.
func TestRigTestNetworkShadowsNothing(t *testing.T) {
	t.Parallel()
	rig, err := filepath.Abs("../../contrib/rig.sh")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(rig); err != nil {
		t.Skip("contrib/rig.sh is not beside this package")
	}
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := file("empty", "")
	// This machine as it is: its own address in 192.0.2.0/24, the mirrors
	// resolving into 203.0.113.0/24.
	addrs := file("addrs", "1: lo    inet 127.0.0.1/8 scope host lo\n2: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0\n")
	routes := file("routes", "default via 192.0.2.1 dev eth0\n192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2\nlocal 192.0.2.2 dev eth0 table local proto kernel scope host src 192.0.2.2\n")
	cases := []struct {
		label                          string
		routes, addrs, hosts, resolved string
		want                           string // "" for none free
	}{
		{"a bare machine takes the first", empty, empty, empty, empty, "198.18.0"},
		{"this machine", routes, addrs, file("hosts", "127.0.0.1 localhost\n"), file("mirrors", "203.0.113.80\n"), "198.18.0"},
		{"a /15 route covers every /24 in it", file("r15", "default via 192.0.2.1 dev eth0\n198.18.0.0/15 via 192.0.2.1 dev eth0\n"), addrs, empty, file("m2", "203.0.113.80\n"), "198.51.100"},
		{"a /16 route in another table, a /25", file("r16", "blackhole 198.18.0.0/16 table 100\n198.51.100.0/25 dev eth1\n"), empty, empty, empty, "203.0.113"},
		{"an address of the machine", empty, file("a2", "3: eth1    inet 198.18.0.7/32 scope global eth1\n"), empty, empty, "198.18.1"},
		{"an address in /etc/hosts", empty, empty, file("h2", "# 198.18.1.9 commented out\n198.18.0.80 deb.example.org\n"), empty, "198.18.1"},
		{"a resolved registry", empty, empty, empty, file("m3", "198.18.0.80\n"), "198.18.1"},
		{"another rig's veth", file("r3", "198.18.0.0/24 dev mtn42 proto kernel scope link src 198.18.0.1\n"), empty, empty, empty, "198.18.1"},
		{"none free", file("r4", "198.18.0.0/15 dev x\n198.51.100.0/24 dev y\n"), addrs, empty, file("m4", "203.0.113.80\n"), ""},
	}
	for _, c := range cases {
		cmd := exec.Command("bash", rig, "pick-testnet", "--routes", c.routes, "--addrs", c.addrs, "--hosts", c.hosts, "--resolved", c.resolved)
		out, err := cmd.Output()
		got := strings.TrimSpace(string(out))
		if c.want == "" {
			if err == nil {
				t.Errorf("%s: picked %q, want none free (an error)", c.label, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: picked %q (%v), want %s", c.label, got, err, c.want)
		}
	}
}
