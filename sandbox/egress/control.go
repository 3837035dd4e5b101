package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/internal/acceptloop"
)

// The control path: `mosaic allow`, `mosaic deny` and `mosaic status` reach
// a running proxy through a Unix socket in a directory of the user's
// runtime directory that no session sees (every session's unit lays an
// empty tmpfs over the runtime directory and binds back only its own
// egress directory, and the bus offers no verb for it). The proxy also
// checks each client: the user's uid (SO_PEERCRED), and a process that is
// not inside mosaic.slice, where every session and what it launches runs.
// It keeps its grants in the same directory, so that a proxy started again
// (systemctl --user restart) has them back.

// ControlDir is the directory of the control socket of the session whose
// egress directory is egressDir: beside it, never inside what a session
// binds.
func ControlDir(egressDir string) string {
	if Weakened { // the test build's hole: the socket beside the session's
		return egressDir
	}
	return filepath.Join(filepath.Dir(filepath.Dir(egressDir)), "egress-control", filepath.Base(egressDir))
}

// The files of the control directory.
const (
	ControlSocketName = "control.sock"
	grantsFileName    = "grants.json"
)

// ControlRequest is what a client sends: entries as ParseAllow reads them,
// and for a grant how long it lasts (0: until the session ends).
type ControlRequest struct {
	Entries []string      `json:"entries"`
	For     time.Duration `json:"for_ns,omitempty"`
	// Once, for an allow, lets the connections held now for the entries
	// go on without granting them (allowOnce).
	Once bool `json:"once,omitempty"`
}

// ControlAnswer is what the proxy answers.
type ControlAnswer struct {
	Error  string  `json:"error,omitempty"`
	Grants []Grant `json:"grants,omitempty"`
	Closed int     `json:"closed,omitempty"` // connections a deny closed
	Once   int     `json:"once,omitempty"`   // held targets an allow --once let through
	State  *State  `json:"state,omitempty"`
}

type peerKey struct{}

// serveControl answers the control socket at path until l is closed.
func (e *Egress) serveControl(l net.Listener) error {
	srv := &http.Server{
		Handler:           e.controlRoutes(),
		MaxHeaderBytes:    8 << 10,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			who, err := controlPeer(c)
			if err != nil {
				who = "" // answered 403 by every route
				e.logf("control: refused a client: %v", err)
			}
			return context.WithValue(ctx, peerKey{}, who)
		},
	}
	return srv.Serve(l)
}

func (e *Egress) controlRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/state", func(w http.ResponseWriter, r *http.Request) {
		st := e.State()
		answer(w, http.StatusOK, ControlAnswer{State: &st})
	})
	mux.HandleFunc("POST /v1/allow", func(w http.ResponseWriter, r *http.Request) {
		req, ok := readControl(w, r)
		if !ok {
			return
		}
		if req.For < 0 {
			answer(w, http.StatusBadRequest, ControlAnswer{Error: "a grant's duration must be positive"})
			return
		}
		if req.Once {
			n, err := e.allowOnce(req.Entries, who(r))
			if err != nil {
				answer(w, http.StatusBadRequest, ControlAnswer{Error: err.Error()})
				return
			}
			answer(w, http.StatusOK, ControlAnswer{Once: n})
			return
		}
		gs, err := e.grant(req.Entries, req.For, who(r))
		if err != nil {
			answer(w, http.StatusBadRequest, ControlAnswer{Error: err.Error()})
			return
		}
		e.save()
		answer(w, http.StatusOK, ControlAnswer{Grants: gs})
	})
	mux.HandleFunc("POST /v1/deny", func(w http.ResponseWriter, r *http.Request) {
		req, ok := readControl(w, r)
		if !ok {
			return
		}
		n, err := e.deny(req.Entries, who(r))
		if err != nil {
			answer(w, http.StatusBadRequest, ControlAnswer{Error: err.Error()})
			return
		}
		answer(w, http.StatusOK, ControlAnswer{Closed: n})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if who(r) == "" {
			answer(w, http.StatusForbidden, ControlAnswer{Error: "not a client the proxy answers: the user's own process, outside every session"})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func who(r *http.Request) string { s, _ := r.Context().Value(peerKey{}).(string); return s }

// readControl reads a bounded request body of at most 64 entries.
func readControl(w http.ResponseWriter, r *http.Request) (ControlRequest, bool) {
	var req ControlRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil || len(req.Entries) == 0 || len(req.Entries) > 64 {
		answer(w, http.StatusBadRequest, ControlAnswer{Error: "want a JSON request naming 1 to 64 entries"})
		return req, false
	}
	return req, true
}

func answer(w http.ResponseWriter, status int, a ControlAnswer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}

// controlPeer names the process at the other end of c, or says why the
// proxy does not answer it: another uid, a process inside a session
// (mosaic.slice), or one it cannot tell (fail closed).
func controlPeer(c net.Conn) (string, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return "", errors.New("not a Unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return "", err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return "", err
	}
	if credErr != nil {
		return "", credErr
	}
	if int(cred.Uid) != os.Getuid() {
		return "", fmt.Errorf("uid %d is not the session's user", cred.Uid)
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cred.Pid))
	if err != nil {
		return "", fmt.Errorf("cannot tell pid %d's cgroup: %w", cred.Pid, err)
	}
	if inSession(string(cg)) && !Weakened {
		return "", fmt.Errorf("pid %d runs inside a session (%s)", cred.Pid, printable(strings.TrimSpace(string(cg))))
	}
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cred.Pid))
	return fmt.Sprintf("uid %d pid %d (%s)", cred.Uid, cred.Pid, printable(strings.TrimSpace(string(comm)))), nil
}

// inSession reports whether a /proc/PID/cgroup text places the process in
// mosaic.slice, where every session, its egress proxy and whatever a
// --may-launch session starts through the bus run.
func inSession(cgroup string) bool {
	for _, line := range strings.Split(cgroup, "\n") {
		// hierarchy-ID:controllers:path, the path being free text
		if f := strings.SplitN(line, ":", 3); len(f) == 3 &&
			(strings.Contains(f[2], "/mosaic.slice/") || strings.HasSuffix(f[2], "/mosaic.slice")) {
			return true
		}
	}
	return false
}

// kept is what the control directory keeps for a proxy started again: the
// running grants and the hosts taken back (a start-list entry denied stays
// denied across a restart). An earlier proxy kept the grants alone, as a
// JSON list; restore reads that too.
type kept struct {
	Grants []Grant  `json:"grants"`
	Denied []string `json:"denied,omitempty"`
	// ReadOnly are the registry hosts whose start-list write grant a deny
	// took back (live.readOnly).
	ReadOnly []string `json:"read_only,omitempty"`
}

// save writes the running grants and the hosts taken back into the control
// directory (0600, atomically), for a proxy started again.
func (e *Egress) save() {
	if e.ControlDir == "" {
		return
	}
	st := e.State()
	b, _ := json.Marshal(kept{Grants: st.Grants, Denied: st.Denied, ReadOnly: e.readOnlyHosts()})
	tmp := filepath.Join(e.ControlDir, "."+grantsFileName+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		e.logf("cannot keep the grants: %v", err)
		return
	}
	if err := os.Rename(tmp, filepath.Join(e.ControlDir, grantsFileName)); err != nil {
		e.logf("cannot keep the grants: %v", err)
	}
}

// readOnlyHosts lists live.readOnly, sorted, for save.
func (e *Egress) readOnlyHosts() []string {
	l := e.live
	l.mu.Lock()
	defer l.mu.Unlock()
	var hs []string
	for h := range l.readOnly {
		hs = append(hs, h)
	}
	sort.Strings(hs)
	return hs
}

// restore takes back the grants a previous proxy of the session kept, but
// for those whose time is up, and the hosts it had taken back.
func (e *Egress) restore() {
	if e.ControlDir == "" {
		return
	}
	b, err := os.ReadFile(filepath.Join(e.ControlDir, grantsFileName))
	if err != nil {
		return
	}
	var k kept
	if err := json.Unmarshal(b, &k); err != nil {
		if err := json.Unmarshal(b, &k.Grants); err != nil { // the earlier form
			e.logf("the kept grants are unreadable, none restored: %v", err)
			return
		}
	}
	now := e.live.now()
	for _, g := range k.Grants {
		var d time.Duration
		if g.Until != nil {
			if d = g.Until.Sub(now); d <= 0 {
				continue
			}
		}
		if _, err := e.grant([]string{g.Entry}, d, g.By+", restored"); err != nil {
			e.logf("a kept grant is not restored: %v", err)
		}
	}
	l := e.live
	l.mu.Lock()
	for _, h := range k.Denied {
		if hp, err := NormalizeHost(h); err == nil {
			l.denied[hp] = true
		}
	}
	for _, h := range k.ReadOnly {
		if hp, err := NormalizeHost(h); err == nil {
			l.readOnly[hp] = true
		}
	}
	l.mu.Unlock()
}

// A ControlClient is `mosaic allow`'s, `deny`'s and `status`'s way to a
// running proxy.
type ControlClient struct {
	Socket string
	hc     *http.Client
}

// NewControlClient talks to the control socket of the session whose egress
// directory is egressDir.
func NewControlClient(egressDir string) *ControlClient {
	socket := filepath.Join(ControlDir(egressDir), ControlSocketName)
	return &ControlClient{Socket: socket, hc: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			// A session starts beside its proxy, not after it: a grant
			// right after the start may come before the proxy listens.
			return acceptloop.DialStarting(ctx, socket, 2*time.Second)
		},
	}}}
}

// ErrNoProxy is a control call's error when no proxy answers the socket.
var ErrNoProxy = errors.New("no egress proxy answers")

// ControlError is the proxy's refusal of a request (bad entries), with its
// message.
type ControlError struct{ Msg string }

func (e *ControlError) Error() string { return e.Msg }

func (c *ControlClient) call(ctx context.Context, method, path string, req *ControlRequest) (ControlAnswer, error) {
	var body io.Reader
	if req != nil {
		b, _ := json.Marshal(req)
		body = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, method, "http://egress"+path, body)
	if err != nil {
		return ControlAnswer{}, err
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		return ControlAnswer{}, fmt.Errorf("%w at %s: %w", ErrNoProxy, c.Socket, err)
	}
	defer resp.Body.Close()
	var a ControlAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&a); err != nil {
		return a, fmt.Errorf("the egress proxy's answer (%s) is unreadable: %w", resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		return a, &ControlError{Msg: a.Error}
	}
	return a, nil
}

// State is the proxy's live view.
func (c *ControlClient) State(ctx context.Context) (State, error) {
	a, err := c.call(ctx, http.MethodGet, "/v1/state", nil)
	if err != nil || a.State == nil {
		return State{}, err
	}
	return *a.State, nil
}

// Allow adds entries for d (0: until the session ends).
func (c *ControlClient) Allow(ctx context.Context, entries []string, d time.Duration) ([]Grant, error) {
	a, err := c.call(ctx, http.MethodPost, "/v1/allow", &ControlRequest{Entries: entries, For: d})
	return a.Grants, err
}

// AllowOnce lets the connections the proxy holds now for entries go on,
// granting nothing (allowOnce), and returns how many targets it answered.
func (c *ControlClient) AllowOnce(ctx context.Context, entries []string) (int, error) {
	a, err := c.call(ctx, http.MethodPost, "/v1/allow", &ControlRequest{Entries: entries, Once: true})
	return a.Once, err
}

// Deny takes entries back and returns how many open connections it closed.
func (c *ControlClient) Deny(ctx context.Context, entries []string) (int, error) {
	a, err := c.call(ctx, http.MethodPost, "/v1/deny", &ControlRequest{Entries: entries})
	return a.Closed, err
}

// listenControl makes the control socket in dir (0600; dir is 0700).
func listenControl(dir string) (net.Listener, error) {
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, ControlSocketName)
	os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	_ = os.Chmod(path, 0o600)
	return l, nil
}
