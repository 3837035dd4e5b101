package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// mosaic list reads the sessions' properties over a bulk connection where
// it can (a unix:path= address) and one by one where it cannot (here an
// address list, which godbus dials and the bulk reader leaves alone): both
// give the same sessions, main PIDs and start times included.
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
	addr := "unix:path=" + filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "bus") + ";unix:path=/nonexistent/bus"
	r := mosaicWith(t, []string{"DBUS_SESSION_BUS_ADDRESS=" + addr}, "", "list", "--json")
	if r.code != 0 {
		t.Fatalf("mosaic list with %s: exit %d: %s", addr, r.code, r.stderr)
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
