package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hostLoopbackService is a service on the host's loopback that a session
// must not reach: it answers every connection with its marker.
func hostLoopbackService(t *testing.T, marker string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, marker)
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// probePorts is a python3 script that connects to each 127.0.0.1 port of
// its arguments and prints what it got.
const probePorts = `import socket, sys
for p in sys.argv[1:]:
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect(("127.0.0.1", int(p)))
        print(p, "REACHED", s.recv(100))
    except Exception as e:
        print(p, "unreachable", type(e).__name__)
`

// TestPublish (issue 30): --publish makes a dev server inside a session
// reachable from the host's loopback, without --network host, and the
// session still reaches nothing of the host: not a service on the host's
// loopback, not the published port itself. The probe is first shown to
// reach that service on the host and from a --network host session (the
// broken control). status shows the port; a port in use or a bad one is
// refused before anything starts.
func TestPublish(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	secret := hostLoopbackService(t, "host-loopback-secret")
	if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(secret)); err != nil {
		t.Fatalf("the host's own service is not reachable from the host: %v", err)
	} else {
		c.Close()
	}
	if err := os.WriteFile(filepath.Join(ws, "probe.py"), []byte(probePorts), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "index.html"), []byte("hello-from-the-session\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	control := mustMosaic(t, "run", "--network", "host", "-w", ws, "--", "python3", "probe.py", strconv.Itoa(secret))
	if !strings.Contains(control.stdout, "REACHED b'host-loopback-secret'") {
		t.Fatalf("the probe does not reach the host's service even with --network host: the test proves nothing:\n%s", control.stdout)
	}

	host := freePort(t)
	name := sessionName(t)
	mustMosaic(t, "start", "--direct", "--name", name, "-w", ws, "--publish", fmt.Sprintf("%d:8000", host), "--", "sh", "-c",
		fmt.Sprintf(`python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 & python3 probe.py %d %d > probed.txt; wait`, secret, host))
	var body string
	eventually(t, 20*time.Second, "the dev server to answer from the host", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/index.html", host))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == 200
	})
	if body != "hello-from-the-session\n" {
		t.Errorf("the host got %q from the published port", body)
	}
	if st := mustMosaic(t, "status", name).stdout; !strings.Contains(st, fmt.Sprintf("published: 127.0.0.1:%d -> 8000", host)) {
		t.Errorf("status does not show the published port:\n%s", st)
	}
	eventually(t, 20*time.Second, "the session's probe", func() bool {
		b, _ := os.ReadFile(filepath.Join(ws, "probed.txt"))
		return strings.Count(string(b), "\n") == 2
	})
	probed, _ := os.ReadFile(filepath.Join(ws, "probed.txt"))
	if strings.Contains(string(probed), "REACHED") || strings.Count(string(probed), "unreachable") != 2 {
		t.Errorf("the publishing session reaches the host's loopback:\n%s", probed)
	}
	// Several connections at once, and one after another.
	for i := 0; i < 5; i++ {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/index.html", host))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
	}

	// Refused before anything starts: a port in use (the host's service),
	// a bad one, and --network host.
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--publish", strconv.Itoa(secret)}, 3, "publish-unavailable"},
		{[]string{"--publish", "70000"}, 2, "bad-publish"},
		{[]string{"--publish", "8000", "--network", "host"}, 2, "bad-publish"},
	} {
		other := sessionName(t)
		r := mosaic(t, append(append([]string{"start", "--direct", "--json", "--name", other, "-w", ws}, tc.args...), "--", "sleep", "60")...)
		if code, _ := jsonError(t, r); r.code != tc.code || code != tc.err {
			t.Errorf("%v: exit %d code %q, want %d %s", tc.args, r.code, code, tc.code, tc.err)
		}
		if units := mosaicUnits(t); strings.Contains(units, other) {
			t.Errorf("%v left units: %s", tc.args, units)
		}
	}

	mustMosaic(t, "stop", name)
	eventually(t, 15*time.Second, "the forwarder to go and the port to close", func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(host))
		if err == nil {
			c.Close()
		}
		return err != nil && !strings.Contains(mosaicUnits(t), name+"-publish")
	})
	mustMosaic(t, "rm", name)
	if _, err := os.Stat(filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "mosaic", "publish", name)); !os.IsNotExist(err) {
		t.Errorf("rm left the forwarder's socket directory: %v", err)
	}
}
