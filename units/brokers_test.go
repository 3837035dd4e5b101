package units

import (
	"fmt"
	"strings"
	"testing"

	sd "github.com/coreos/go-systemd/v22/dbus"

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
	l := Launch{Stdio: &[3]int{slave, slave, slave}, Attach: &master}
	s.TTY = true
	s.Publish = []publish.Port{{Addr: "127.0.0.1", HostPort: 8080, Port: 8000}}
	aux := Render(s, l, Features{}).Aux
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
	p := props(Render(s, l, Features{}).Properties)
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

// TestSSHAgentUnit: the ssh agent filter starts with the session, which is
// BindsTo= it; it writes only its socket's directory and reaches the
// user's agent by its socket alone; the session's unit and bwrap see that
// directory read-only, and nothing of the user's agent.
func TestSSHAgentUnit(t *testing.T) {
	s := testSpec()
	s.MosaicBin = "/usr/bin/mosaic"
	s.RuntimeDir = "/run/user/1000"
	if len(Render(s, Launch{}, Features{}).Aux) != 0 {
		t.Fatal("a session lent nothing has a broker")
	}
	s.SSHAgent = &SSHAgent{Upstream: "/tmp/ssh-XXXX/agent.1"}
	var m map[string]sd.Property
	for _, u := range Render(s, Launch{}, Features{}).Aux {
		if u.Name == s.SSHAgentUnit() {
			m = props(u.Properties)
		}
	}
	if m == nil {
		t.Fatal("no filter unit")
	}
	dir := SSHAgentDir(s.RuntimeDir, s.Name)
	if b := fmt.Sprint(m["BindPaths"].Value.Value()); !strings.Contains(b, dir) || !strings.Contains(b, "/tmp/ssh-XXXX/agent.1") || strings.Count(b, "{") != 2 {
		t.Errorf("the filter's binds: %s", b)
	}
	if argv := fmt.Sprint(m["ExecStartEx"].Value.Value()); !strings.Contains(argv, "ssh-agent "+s.Name) {
		t.Errorf("the filter's command: %s", argv)
	}
	p := props(Render(s, Launch{}, Features{}).Properties)
	if v := fmt.Sprint(p["BindsTo"].Value.Value()); !strings.Contains(v, s.SSHAgentUnit()) {
		t.Errorf("the session's BindsTo: %s", v)
	}
	if v := fmt.Sprint(p["BindReadOnlyPaths"].Value.Value()); !strings.Contains(v, dir) || strings.Contains(v, "ssh-XXXX") {
		t.Errorf("the session unit's read-only binds (bwrap's source must be in its sight): %s", v)
	}
	var inside []string
	for _, b := range s.Binds() {
		inside = append(inside, b.Src+"->"+b.Dst)
		if strings.Contains(b.Src, "ssh-XXXX") {
			t.Errorf("the user's agent is bound into the session: %+v", b)
		}
	}
	if !strings.Contains(strings.Join(inside, " "), dir+"->/run/mosaic/ssh-agent") {
		t.Errorf("the filter's socket is not bound in: %v", inside)
	}
}
