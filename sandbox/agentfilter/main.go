package agentfilter

import (
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"mosaic/internal/journald"
)

// Stage is the hidden mosaic stage the filter's unit runs.
const Stage = "ssh-agent"

// SocketName is the filter's socket in its directory, which the session
// sees read-only at DirInside (SSH_AUTH_SOCK=SocketInside).
const (
	SocketName   = "agent.sock"
	DirInside    = "/run/mosaic/ssh-agent"
	SocketInside = DirInside + "/" + SocketName
)

// Spec is a Lent as one argument of the stage's command line:
// sign,KEY or login,KEY,NAME=HOSTKEY,... with each key's wire form in
// base64 (public keys only: nothing secret is in the argv).
func (l Lent) Spec() string {
	enc := base64.StdEncoding.EncodeToString
	if l.SignOnly {
		return "sign," + enc(l.Key.Marshal())
	}
	s := "login," + enc(l.Key.Marshal())
	for _, d := range l.Dests {
		for _, k := range d.Keys {
			s += "," + strings.ReplaceAll(d.Name, ",", "_") + "=" + enc(k.Marshal())
		}
	}
	return s
}

// ParseSpec is the Lent of a Spec.
func ParseSpec(spec string) (Lent, error) {
	parts := strings.Split(spec, ",")
	if len(parts) < 2 || (parts[0] != "sign" && parts[0] != "login") || (parts[0] == "sign") != (len(parts) == 2) {
		return Lent{}, fmt.Errorf("lend %q: want sign,KEY or login,KEY,NAME=HOSTKEY[,...]", spec)
	}
	key, err := parseKey(parts[1])
	if err != nil {
		return Lent{}, fmt.Errorf("lend %q: %w", spec, err)
	}
	l := Lent{Key: key, SignOnly: parts[0] == "sign"}
	for _, p := range parts[2:] {
		name, b64, ok := strings.Cut(p, "=")
		hk, err := parseKey(b64)
		if !ok || err != nil {
			return Lent{}, fmt.Errorf("lend %q: destination %q: want NAME=HOSTKEY", spec, p)
		}
		if n := len(l.Dests); n > 0 && l.Dests[n-1].Name == name {
			l.Dests[n-1].Keys = append(l.Dests[n-1].Keys, hk)
		} else {
			l.Dests = append(l.Dests, Dest{Name: name, Keys: []ssh.PublicKey{hk}})
		}
	}
	return l, nil
}

// parseKey is a public key from its wire form in base64.
func parseKey(b64 string) (ssh.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, err
	}
	return ssh.ParsePublicKey(b)
}

// Argv is the filter unit's command line.
func Argv(mosaicBin, session, socket, upstream string, lent []Lent) []string {
	argv := []string{mosaicBin, Stage, session, socket, upstream}
	for _, l := range lent {
		argv = append(argv, l.Spec())
	}
	return argv
}

// Main is the filter: SESSION SOCKET UPSTREAM LEND...; it listens on the
// socket, says it is ready, and serves until SIGTERM, logging each use on
// its stderr (the journal) and as an audit event.
func Main(args []string, ready func()) int {
	if len(args) < 4 {
		fmt.Fprintln(os.Stderr, "mosaic ssh-agent: want SESSION SOCKET UPSTREAM LEND...")
		return 2
	}
	session, socket, upstream := args[0], args[1], args[2]
	// x/crypto's server logs each failed request once more, without the
	// session, the key or why: the filter's own line says it all.
	log.SetOutput(io.Discard)
	f := &Filter{Report: func(u Use) { report(session, u) }}
	for _, a := range args[3:] {
		l, err := ParseSpec(a)
		if err != nil {
			fmt.Fprintf(os.Stderr, "mosaic ssh-agent: session %s: %v\n", session, err)
			return 2
		}
		f.Lent = append(f.Lent, l)
	}
	_ = os.Remove(socket) // a dead filter's, in a directory of mosaic's own
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "mosaic ssh-agent: session %s: %v\n", session, err)
		return 1
	}
	ln.SetUnlinkOnClose(true)
	defer ln.Close()
	go func() { _ = f.Serve(ln, func() (net.Conn, error) { return net.Dial("unix", upstream) }) }()
	term := make(chan os.Signal, 1)
	signal.Notify(term, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	for _, l := range f.Lent {
		fmt.Fprintf(os.Stderr, "mosaic ssh-agent: session %s: lending %s\n", session, l.Describe())
	}
	ready()
	<-term
	return 0
}

// Describe is what a Lent is lent for, for the log and status.
func (l Lent) Describe() string {
	if l.SignOnly {
		return ssh.FingerprintSHA256(l.Key) + " to sign only"
	}
	var names []string
	for _, d := range l.Dests {
		names = append(names, d.Name)
	}
	return ssh.FingerprintSHA256(l.Key) + " to log in to " + strings.Join(names, ", ")
}

// report logs u in one line and as an audit event.
func report(session string, u Use) {
	fmt.Fprintf(os.Stderr, "mosaic ssh-agent: session %s: %s\n", session, u)
	verdict := "allowed"
	if !u.Allowed {
		verdict = "refused"
	}
	_ = journald.Event(journald.SSHAgentUse, session, "ssh-agent-"+verdict, "session "+session+": "+u.String(),
		journald.Field{Key: "MOSAIC_KEY", Value: u.Fingerprint}, journald.Field{Key: "MOSAIC_DEST", Value: u.Dest},
		journald.Field{Key: "MOSAIC_OP", Value: u.Op}, journald.Field{Key: "MOSAIC_VERDICT", Value: verdict},
		journald.Field{Key: "MOSAIC_WHY", Value: u.Why})
}
