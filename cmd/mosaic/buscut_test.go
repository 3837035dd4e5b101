package main

import (
	"bufio"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"mosaic/cmd/mosaic/internal/bus"
	"mosaic/sandbox"
)

// TestBusCutOff (31.16): a bus client whose bus dies after it took a
// launch (it read the request, then the connection closed: EOF) says the
// session may have been launched and how to check, not only "EOF". The
// client's logic alone, against a socket that behaves as the dying bus.
func TestBusCutOff(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "bus.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			bufio.NewReader(c).ReadBytes('\n')
			c.Close()
		}
	}()
	t.Setenv(sandbox.BusEnv, sock)
	for _, tc := range []struct {
		req  bus.Request
		want string
	}{
		{bus.Request{Verb: "launch", Name: "w1"}, "may have been launched all the same; check with `mosaic bus status w1`"},
		{bus.Request{Verb: "launch"}, "may have been launched all the same; check with `mosaic bus list`"},
		{bus.Request{Verb: "stop", Name: "w1"}, "may have been stopped all the same"},
	} {
		var v any
		err := askBus(&output{}, tc.req, &v)
		if err == nil || !strings.Contains(err.Error(), "EOF") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.req.Verb, err, tc.want)
		}
	}
}
