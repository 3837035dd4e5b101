package manager

import (
	"context"
	"os"
	"reflect"
	"testing"
	"time"

	"mosaic/manager/bulkget"
)

// Against the user manager the tests run under (contrib/with-user-manager.sh):
// the bulk connection answers as godbus's Gets do, an error answer leaves
// the property out, and an address it cannot dial is an error (List then
// goes one by one).
func TestBulkAgainstSystemd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := Connect(ctx, Options{})
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no user manager under CI: %v", err)
		}
		t.Skipf("no user manager (run under contrib/with-user-manager.sh): %v", err)
	}
	defer m.Close()
	scope := unitPath("init.scope")
	gets := []bulkget.Get{
		{Path: "/org/freedesktop/systemd1", Iface: "org.freedesktop.systemd1.Manager", Name: "Version"},
		{Path: "/org/freedesktop/systemd1", Iface: "org.freedesktop.systemd1.Manager", Name: "NNames"},
		{Path: scope, Iface: "org.freedesktop.systemd1.Unit", Name: "Id"},
		{Path: scope, Iface: "org.freedesktop.systemd1.Unit", Name: "ActiveState"},
		{Path: scope, Iface: "org.freedesktop.systemd1.Unit", Name: "InvocationID"},
		{Path: scope, Iface: "org.freedesktop.systemd1.Unit", Name: "ActiveEnterTimestamp"},
		{Path: scope, Iface: "org.freedesktop.systemd1.Unit", Name: "Following"},
		{Path: scope, Iface: "org.freedesktop.systemd1.Unit", Name: "NoSuchProperty"},
		{Path: scope, Iface: "org.freedesktop.systemd1.Scope", Name: "Result"},
	}
	got, err := bulkget.Read(ctx, m.private, dialTimeout, callTimeout, gets)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range gets {
		want := m.properties(ctx, g.Path, g.Iface, []string{g.Name})()[g.Name]
		if g.Name == "NNames" { // may change in between: the type is what matters
			if _, ok := got[i].(uint32); !ok {
				t.Errorf("%s: %#v, want a uint32", g.Name, got[i])
			}
			continue
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Errorf("%s.%s: bulk %#v, godbus %#v", g.Iface, g.Name, got[i], want)
		}
	}
	if got[0] != m.version || got[2] != "init.scope" || got[3] != "active" || got[7] != nil {
		t.Errorf("Version %#v (want %q), Id %#v, ActiveState %#v, NoSuchProperty %#v (want nil)", got[0], m.version, got[2], got[3], got[7])
	}
	if _, err := bulkget.Read(ctx, "unix:abstract=/mosaic-test", dialTimeout, callTimeout, gets); err == nil {
		t.Error("an abstract address: no error")
	}
}
