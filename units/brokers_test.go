package units

import (
	"fmt"
	"strings"
	"testing"

	"mosaic/sandbox/publish"
)

// TestBrokerUnits: the terminal holder and the publish forwarder start with
// the session in one call, which is BindsTo= them and comes After=; the
// holder gets the master on stdin and its output goes to the journal
// (systemd would have it inherit stdin: into the session's terminal), with
// no network; the forwarder is in the host's network (it listens there),
// and each may write only its sockets' directory.
func TestBrokerUnits(t *testing.T) {
	s := testSpec()
	s.MosaicBin = "/usr/bin/mosaic"
	s.RuntimeDir = "/run/user/1000"
	master, slave := 7, 8
	s.Stdio, s.Attach, s.TTY = &[3]int{slave, slave, slave}, &master, true
	s.Publish = []publish.Port{{Addr: "127.0.0.1", HostPort: 8080, Port: 8000}}
	aux := AuxUnits(s)
	names := map[string][]string{}
	for _, u := range aux {
		m := props(u.Properties)
		names[u.Name] = []string{fmt.Sprint(m["BindPaths"].Value.Value()), fmt.Sprint(m["ExecStartEx"].Value.Value())}
		switch u.Name {
		case s.PTYUnit():
			if m["StandardOutput"].Value.Value() != "journal" || m["StandardError"].Value.Value() != "journal" || m["PrivateNetwork"].Value.Value() != true {
				t.Errorf("the holder: %v %v %v", m["StandardOutput"], m["StandardError"], m["PrivateNetwork"])
			}
			if _, ok := m["StandardInputFileDescriptor"]; !ok {
				t.Error("the holder has no stdin")
			}
		case s.PublishUnit():
			if _, ok := m["PrivateNetwork"]; ok {
				t.Error("the forwarder is not in the host's network")
			}
		}
	}
	if b := names[s.PTYUnit()]; len(b) == 0 || !strings.Contains(b[0], "/run/user/1000/mosaic/attach") || strings.Count(b[0], "{") != 1 {
		t.Errorf("the holder's binds: %v", b)
	}
	if b := names[s.PublishUnit()]; len(b) == 0 || !strings.Contains(b[0], PublishDir(s.RuntimeDir, s.Name)) || !strings.Contains(b[1], "127.0.0.1,8080,8000") {
		t.Errorf("the forwarder: %v", b)
	}
	p := props(Properties(s, Features{}))
	for _, k := range []string{"BindsTo", "After"} {
		if v := fmt.Sprint(p[k].Value.Value()); !strings.Contains(v, s.PTYUnit()) || !strings.Contains(v, s.PublishUnit()) {
			t.Errorf("the session's %s: %s", k, v)
		}
	}
	if _, ok := p["CollectMode"]; ok {
		t.Error("a start --pty session is collected at its end like a run's")
	}
	if _, ok := p["ExecStopPost"]; !ok {
		t.Error("a start --pty session records no end")
	}
	if init := strings.Join(InitArgs(s), " "); !strings.Contains(init, "--publish 8000") || !strings.Contains(init, "--tty") {
		t.Errorf("the init's arguments: %s", init)
	}
}
