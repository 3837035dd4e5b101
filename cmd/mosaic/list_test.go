package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// mosaic list reads the sessions' properties over a bulk connection to the
// manager's private socket where it can, and one by one over its bus
// connection where it cannot (here a runtime directory without the
// socket, the bus named by DBUS_SESSION_BUS_ADDRESS): both give the same
// sessions, main PIDs and start times included.
func TestListBulkAndOneByOneAgree(t *testing.T) {
	needRig(t)
	var names []string
	for i := 0; i < 2; i++ {
		name := sessionName(t)
		mustMosaic(t, "start", "--name", name, "--workspace", workspace(t), "--", "sleep", "300")
		t.Cleanup(func() { mosaic(t, "stop", "--timeout", "0", name); mosaic(t, "rm", name) })
		names = append(names, name)
	}
	ours := func(out string) map[string]map[string]any {
		var list []map[string]any
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("mosaic list --json: %v\n%s", err, out)
		}
		got := map[string]map[string]any{}
		for _, s := range list {
			for _, n := range names {
				if s["name"] == n {
					delete(s, "cpu_nsec") // moves between the two lists
					delete(s, "memory_bytes")
					got[n] = s
				}
			}
		}
		return got
	}
	bulk := ours(mustMosaic(t, "list", "--json").stdout)
	addr := "unix:path=" + filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "bus")
	rt := t.TempDir()
	r := mosaicWith(t, []string{"DBUS_SESSION_BUS_ADDRESS=" + addr, "XDG_RUNTIME_DIR=" + rt}, "", "list", "--json")
	if r.code != 0 {
		t.Fatalf("mosaic list with %s and no private socket: exit %d: %s", addr, r.code, r.stderr)
	}
	oneByOne := ours(r.stdout)
	for _, n := range names {
		s := bulk[n]
		if s == nil || s["state"] != "active" || s["main_pid"] == nil || s["since"] == nil || s["result"] != "success" {
			t.Errorf("bulk list: session %s is %v", n, s)
		}
	}
	if !reflect.DeepEqual(bulk, oneByOne) {
		t.Errorf("the lists differ:\nbulk        %v\none by one  %v", bulk, oneByOne)
	}
}

// mosaic list and status read a session's counters from the cgroup
// filesystem (package cgcount), not from systemd: they must say what
// systemd says. Where the hierarchy is unified both have them (tasks
// exactly: three sleeps, sh and the init); where it is not (a hybrid host,
// whose user manager has no counters) neither has.
func TestCountersAgreeWithSystemd(t *testing.T) {
	needRig(t)
	name := sessionName(t)
	mustMosaic(t, "start", "--name", name, "--workspace", workspace(t), "--", "sh", "-c", "sleep 300 & sleep 300 & sleep 300")
	t.Cleanup(func() { mosaic(t, "stop", "--timeout", "0", name); mosaic(t, "rm", name) })
	unit := "mosaic-" + name + ".service"
	eventually(t, 10*time.Second, "the session's three sleeps", func() bool {
		return strings.Count(systemctl(t, "status", "--no-pager", unit), "sleep 300") >= 3
	})
	var list []map[string]any
	if err := json.Unmarshal([]byte(mustMosaic(t, "list", "--json").stdout), &list); err != nil {
		t.Fatal(err)
	}
	var listed map[string]any
	for _, s := range list {
		if s["name"] == name {
			listed = s
		}
	}
	var status map[string]any
	if err := json.Unmarshal([]byte(mustMosaic(t, "status", "--json", name).stdout), &status); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ prop, key string }{{"TasksCurrent", "tasks"}, {"MemoryCurrent", "memory_bytes"}, {"CPUUsageNSec", "cpu_nsec"}} {
		sys := unitProperty(t, unit, c.prop)
		if sys == "" {
			sys = "[not set]"
		}
		for what, s := range map[string]map[string]any{"list": listed, "status": status} {
			v, ok := s[c.key]
			switch {
			case sys == "[not set]" && ok:
				t.Errorf("%s: %s is %v where systemd has none", what, c.key, v)
			case sys != "[not set]" && !ok:
				t.Errorf("%s: no %s where systemd has %s", what, c.key, sys)
			case c.key == "tasks" && ok && fmt.Sprint(v) != sys:
				t.Errorf("%s: %d tasks where systemd has %s", what, v, sys)
			}
		}
	}
}
