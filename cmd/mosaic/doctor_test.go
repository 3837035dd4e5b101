package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type doctorDoc struct {
	OK     bool
	Checks []struct{ Name, Status, Detail, Fix string }
	Probe  struct {
		Answers []struct {
			Name, Want, Got string
			OK              bool
		}
		Network, Error string
	}
}

func runDoctor(t *testing.T, env []string, args ...string) (doctorDoc, int) {
	t.Helper()
	r := mosaicWith(t, env, "", append([]string{"doctor", "--json"}, args...)...)
	var d doctorDoc
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("doctor --json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	return d, r.code
}

func status(d doctorDoc, name string) string {
	for _, c := range d.Checks {
		if c.Name == name {
			return c.Status
		}
	}
	return "missing"
}

func TestDoctor(t *testing.T) {
	needRig(t)
	t.Parallel()
	d, code := runDoctor(t, nil)
	if code != 0 || !d.OK {
		t.Fatalf("doctor on a healthy rig: exit %d, %+v", code, d)
	}
	for _, name := range []string{"user-manager", "systemd-version", "user-namespaces", "bwrap", "stage-binary", "journal"} {
		if s := status(d, name); s != "ok" {
			t.Errorf("check %s: %s, want ok", name, s)
		}
	}
	for _, name := range []string{"lingering", "cgroup-controllers"} {
		if s := status(d, name); s == "missing" {
			t.Errorf("check %s missing", name)
		}
	}
	// The syscall filter's rows only when asked for, or when a check
	// failed, so that the checks do not scroll away (issue 30).
	if r := mosaic(t, "doctor"); r.code != 0 || strings.Contains(r.stdout, "syscall filter") || !strings.Contains(r.stdout, "journal") {
		t.Errorf("doctor: exit %d, the syscall table or no journal check:\n%s", r.code, r.stdout)
	}
	if r := mosaic(t, "doctor", "--verbose"); r.code != 0 || !strings.Contains(r.stdout, "syscall filter") {
		t.Errorf("doctor --verbose: exit %d, no syscall table:\n%s", r.code, r.stdout)
	}
	if r := mosaicWith(t, []string{"MOSAIC_BWRAP=/nonexistent/bwrap"}, "", "doctor"); r.code != 1 || !strings.Contains(r.stdout, "syscall filter") {
		t.Errorf("doctor with a failed check: exit %d, no syscall table:\n%s", r.code, r.stdout)
	}
	d, code = runDoctor(t, []string{"MOSAIC_BWRAP=/nonexistent/bwrap"})
	if code != 1 || d.OK || status(d, "bwrap") != "fail" {
		t.Errorf("doctor without bwrap: exit %d, bwrap %s; want exit 1 and bwrap fail", code, status(d, "bwrap"))
	}
	for _, c := range d.Checks {
		if c.Status != "ok" && c.Fix == "" && c.Name != "cgroup-controllers" {
			t.Errorf("check %s is %s without a fix", c.Name, c.Status)
		}
	}
}

func TestDoctorProbe(t *testing.T) {
	needRig(t)
	t.Parallel()
	d, code := runDoctor(t, nil, "--probe")
	if code != 0 || !d.OK || len(d.Probe.Answers) != 16 || d.Probe.Network == "" {
		t.Fatalf("doctor --probe on a healthy rig: exit %d, %+v", code, d.Probe)
	}
	for _, a := range d.Probe.Answers {
		if !a.OK {
			t.Errorf("probe %s: %s, want %s", a.Name, a.Got, a.Want)
		}
	}
	// A bwrap that also binds the host's /dev/shm: the probe must fail
	// exactly that check, and doctor must say so in its exit code.
	leaky := filepath.Join(workspace(t), "bwrap")
	os.WriteFile(leaky, []byte(`#!/bin/sh
for a in "$@"; do
	shift
	[ "$a" = "--chdir" ] && set -- "$@" --bind /dev/shm /dev/shm
	set -- "$@" "$a"
done
exec /usr/bin/bwrap "$@"
`), 0o700)
	d, code = runDoctor(t, []string{"MOSAIC_BWRAP=" + leaky}, "--probe")
	var failed []string
	for _, a := range d.Probe.Answers {
		if !a.OK {
			failed = append(failed, a.Name)
		}
	}
	if code != 1 || d.OK || len(failed) != 1 || failed[0] != "host-shm" {
		t.Errorf("probe through a leaky bwrap: exit %d, failed %v (%s); want exit 1 and exactly host-shm", code, failed, d.Probe.Error)
	}
}
