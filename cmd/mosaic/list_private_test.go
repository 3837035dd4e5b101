package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestListPrivateSocketNotAnswering: mosaic list sends its bulk reads to
// the manager's private socket, which nothing checks before (its bus
// connection was made elsewhere). Something there that takes the
// connection and never answers (a same-user process that took the path,
// a wedged listener), or answers the authentication and then nothing,
// must cost a bounded wait and then give the sessions as they are (read
// one by one over the bus) or an error: never a list that silently lacks
// them. (Before, the one-by-one reads ran on the bulk read's spent
// deadline, every one failed, and list printed [] and exited 0.)
func TestListPrivateSocketNotAnswering(t *testing.T) {
	needRig(t)
	name := sessionName(t)
	mustMosaic(t, "start", "--name", name, "--workspace", workspace(t), "--", "sleep", "300")
	t.Cleanup(func() { mosaic(t, "stop", "--timeout", "0", name); mosaic(t, "rm", name) })
	bus := "unix:path=" + filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "bus")
	for _, mode := range []string{"silent", "authenticated"} {
		t.Run(mode, func(t *testing.T) {
			// A short path: a socket's is at most 107 bytes.
			rt, err := os.MkdirTemp("", "lp")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(rt)
			if err = os.Mkdir(filepath.Join(rt, "systemd"), 0o700); err != nil {
				t.Fatal(err)
			}
			l, err := net.Listen("unix", filepath.Join(rt, "systemd", "private"))
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
					defer c.Close()
					if mode != "silent" {
						go func() {
							if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
								c.Write([]byte("OK 0123456789abcdef0123456789abcdef\r\n"))
							}
						}()
					}
				}
			}()
			began := time.Now()
			r := mosaicWith(t, []string{"DBUS_SESSION_BUS_ADDRESS=" + bus, "XDG_RUNTIME_DIR=" + rt}, "", "list", "--json")
			took := time.Since(began)
			if took > 25*time.Second {
				t.Errorf("mosaic list took %v with a private socket that does not answer", took)
			}
			if r.code != 0 {
				if r.stdout != "" {
					t.Errorf("mosaic list failed (exit %d) but printed a list: %s", r.code, r.stdout)
				}
				return // an error, said as one: fine
			}
			var list []map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
				t.Fatalf("mosaic list --json: %v\n%s", err, r.stdout)
			}
			for _, s := range list {
				if s["name"] == name {
					return
				}
			}
			t.Errorf("mosaic list exited 0 after %v without the running session %s: %s\nstderr: %s", took, name, r.stdout, r.stderr)
		})
	}
}
