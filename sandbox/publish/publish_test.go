package publish

import (
	"io"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Port
		bad  bool
	}{
		{in: "8000", want: Port{"127.0.0.1", 8000, 8000}},
		{in: "8080:8000", want: Port{"127.0.0.1", 8080, 8000}},
		{in: "127.0.0.1:8080:8000", want: Port{"127.0.0.1", 8080, 8000}},
		{in: "0.0.0.0:8000", want: Port{"0.0.0.0", 8000, 8000}},
		{in: "[::1]:8080:8000", want: Port{"::1", 8080, 8000}},
		{in: "[::1]:8080", want: Port{"::1", 8080, 8080}},
		{in: "70000", bad: true},
		{in: "0", bad: true},
		{in: "08000", bad: true},
		{in: "a:b", bad: true},
		{in: "1:2:3:4", bad: true},
		{in: "localhost:8000:80", bad: true},
		{in: "[127.0.0.1]:80", bad: true},
		{in: "", bad: true},
	} {
		got, err := Parse(tc.in)
		if tc.bad != (err != nil) || (!tc.bad && got != tc.want) {
			t.Errorf("Parse(%q) = %+v, %v", tc.in, got, err)
		}
		if err == nil {
			if back, err := ParseSpec(got.Spec()); err != nil || back != got {
				t.Errorf("ParseSpec(Spec(%+v)) = %+v, %v", got, back, err)
			}
		}
	}
}

// forwarderFor runs a forwarder's two halves in this process: host clients
// on a loopback port, offers on a socket in a temporary directory.
func forwarderFor(t *testing.T, p Port) (hostAddr, socket string, f *forwarder) {
	t.Helper()
	socket = filepath.Join(t.TempDir(), SocketName)
	f = &forwarder{idle: make(chan net.Conn, MaxIdle), slots: make(chan struct{}, MaxConns)}
	offers, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { offers.Close(); host.Close() })
	go f.takeOffers(offers)
	go f.serveHost(host, p)
	return host.Addr().String(), socket, f
}

// TestForwardToSession: a host client reaches a server on the session's
// side through an offer, both ways; several in turn.
func TestForwardToSession(t *testing.T) {
	server, _ := net.Listen("tcp", "127.0.0.1:0")
	defer server.Close()
	go func() {
		for {
			c, err := server.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	port := server.Addr().(*net.TCPAddr).Port
	host, socket, _ := forwarderFor(t, Port{"127.0.0.1", 1, port})
	Offer(socket, []int{port})
	for i := 0; i < 10; i++ {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		msg := "ping-" + strconv.Itoa(i)
		c.Write([]byte(msg))
		c.(*net.TCPConn).CloseWrite()
		b, _ := io.ReadAll(c)
		c.Close()
		if string(b) != msg {
			t.Fatalf("connection %d: got %q", i, b)
		}
	}
}

// TestHostileOffers: a session that floods the socket with offers has at
// most MaxIdle kept; an offer is told the port the forwarder chose and
// nothing else; a session port the init was not given is not connected to.
func TestHostileOffers(t *testing.T) {
	host, socket, f := forwarderFor(t, Port{"127.0.0.1", 1, 4242})
	var conns []net.Conn
	for i := 0; i < 3*MaxIdle; i++ {
		c, err := net.Dial("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(f.idle) < MaxIdle && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(f.idle); n != MaxIdle {
		t.Errorf("%d offers kept, want %d", n, MaxIdle)
	}
	closed := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF {
			closed++
		}
	}
	if closed != 2*MaxIdle {
		t.Errorf("%d offers beyond the bound closed, want %d", closed, 2*MaxIdle)
	}
	// A host client: the first kept offer gets the forwarder's port.
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := false
	for _, o := range conns {
		o.SetReadDeadline(time.Now().Add(2 * time.Second))
		b := make([]byte, 2)
		if n, _ := io.ReadFull(o, b); n == 2 {
			if p := int(b[0])<<8 | int(b[1]); p != 4242 {
				t.Errorf("an offer was asked for port %d", p)
			}
			got = true
			break
		}
	}
	if !got {
		t.Error("no offer was asked for the host client")
	}
	// The init's half refuses a port it was not given.
	a, b := net.Pipe()
	go answer(a, 22, map[int]bool{4242: true})
	b.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := b.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("an offer asked for a port the session did not publish: %v", err)
	}
}
