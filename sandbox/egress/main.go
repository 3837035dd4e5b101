package egress

import (
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/internal/acceptloop"
	"mosaic/internal/journald"
	"mosaic/internal/sessionfile"
)

// Stage is the first argument of the mosaic binary that makes it a
// session's egress proxy (the egress unit's ExecStart).
const Stage = "egress"

// Config is what the egress unit's command line tells the proxy. Argv
// writes it (for the unit) and ParseArgs reads it back (in the unit): one
// format, kept in one place. It never holds a secret: the unit's command
// line is visible to every process of the user (`systemctl show`).
type Config struct {
	Session string
	Socket  string   // the Unix socket to listen on, in the session's egress directory
	Allow   []string // --allow-host entries, as ParseAllow reads them
	// Inject are the credentials the proxy puts into requests; their
	// values and placeholders arrive in the unit's environment file, Drop,
	// which the proxy deletes once it has read it.
	Inject []Rule
	// Git are the git credentials lent (--lend-git); their tokens, users
	// and placeholders arrive in the same environment file.
	Git  []GitLend
	Drop string
	// Control is the directory of the control socket (ControlDir), which
	// no session sees.
	Control string
	// Record is where the proxy leaves its record (RecordDir).
	Record string
	// Ask is how long a connection to a host not on the list is held for
	// the user's answer (--ask); 0: refused at once.
	Ask time.Duration
}

// Argv is the egress unit's command line, argv[0] being the mosaic binary.
func (c Config) Argv(mosaicBin string) []string {
	argv := []string{mosaicBin, Stage, "--session", c.Session, "--socket", c.Socket}
	for _, a := range c.Allow {
		argv = append(argv, "--allow", a)
	}
	for _, r := range c.Inject {
		argv = append(argv, "--inject", r.String())
	}
	for _, g := range c.Git {
		argv = append(argv, "--lend-git", g.String())
	}
	if c.Drop != "" {
		argv = append(argv, "--drop", c.Drop)
	}
	if c.Control != "" {
		argv = append(argv, "--control", c.Control)
	}
	if c.Record != "" {
		argv = append(argv, "--record", c.Record)
	}
	if c.Ask > 0 {
		argv = append(argv, "--ask", c.Ask.String())
	}
	return argv
}

// ParseArgs reads the arguments after Stage, as Argv wrote them.
func ParseArgs(args []string) (Config, error) {
	var c Config
	for len(args) >= 2 {
		switch args[0] {
		case "--session":
			c.Session = args[1]
		case "--socket":
			c.Socket = args[1]
		case "--allow":
			c.Allow = append(c.Allow, args[1])
		case "--inject":
			r, err := ParseRule(args[1])
			if err != nil {
				return Config{}, err
			}
			c.Inject = append(c.Inject, r)
		case "--lend-git":
			g, err := ParseGitLend(args[1])
			if err != nil {
				return Config{}, err
			}
			c.Git = append(c.Git, g)
		case "--drop":
			c.Drop = args[1]
		case "--control":
			c.Control = args[1]
		case "--record":
			c.Record = args[1]
		case "--ask":
			d, err := time.ParseDuration(args[1])
			if err != nil || d <= 0 {
				return Config{}, fmt.Errorf("bad --ask %q: a duration such as 30s", args[1])
			}
			c.Ask = d
		default:
			return Config{}, fmt.Errorf("unknown option %s", args[0])
		}
		args = args[2:]
	}
	if c.Socket == "" || len(args) > 0 {
		return Config{}, errors.New("usage: egress --session NAME --socket PATH [--allow HOST[:PORT]]... [--inject VAR=HEADER@HOST:PORT]... [--lend-git URL=OPS]... [--drop ENVFILE] [--control DIR] [--record DIR]")
	}
	return c, nil
}

// Main is `mosaic egress ...`, the egress unit's main process: it listens
// on the socket, reports READY=1 through notify, and serves until SIGTERM
// (stop). It returns the process's exit status.
func Main(args []string, notify func()) int {
	if err := serveMain(args, notify); err != nil {
		fmt.Fprintf(os.Stderr, "mosaic egress: %v\n", err)
	}
	return 1
}

func serveMain(args []string, notify func()) error {
	c, err := ParseArgs(args)
	if err != nil {
		return err
	}
	// Marked alive first: a proxy that dies from here on is seen dead
	// (Alive), by the session's end and by mosaic's clients.
	if err := acceptloop.HoldAlive(filepath.Join(filepath.Dir(c.Socket), AliveFile)); err != nil {
		fmt.Fprintf(os.Stderr, "mosaic egress: session %s: cannot mark the proxy alive (its death would go unseen): %v\n", c.Session, err)
	}
	e := &Egress{Session: c.Session, Log: os.Stderr, ControlDir: c.Control, RecordDir: c.Record, Ask: c.Ask}
	e.Audit = func(f []journald.Field) {
		if err := journald.Send(f); err != nil { // the line on stderr stays
			e.logf("audit event not written to the journal: %v", err)
		}
	}
	if e.Allow, err = ParseAllow(c.Allow); err != nil {
		return err
	}
	// Every proxy has its session's CA, made once as it starts: the hosts
	// it injects into or lends git for, and the registries it reads to
	// refuse writes (registry.go), granted at the start or live.
	if e.Inject, err = injector(c); err != nil {
		return err
	}
	if err := e.Inject.WriteCA(filepath.Dir(c.Socket)); err != nil {
		return fmt.Errorf("cannot write the session's CA certificate: %w", err)
	}
	l, cl, err := listeners(c)
	if err != nil {
		return err
	}
	if allowed := e.Allow.Strings(); len(allowed) > 0 {
		fmt.Fprintf(os.Stderr, "mosaic egress: session %s: allowing %s\n", e.Session, strings.Join(allowed, ", "))
	} else {
		fmt.Fprintf(os.Stderr, "mosaic egress: session %s: allows nothing yet (grant with mosaic allow %s HOST)\n", e.Session, e.Session)
	}
	if cl != nil {
		e.start()
		e.restore()
		go func() {
			if err := e.ServeControl(cl); err != nil {
				fmt.Fprintf(os.Stderr, "mosaic egress: session %s: the control socket failed: %v\n", e.Session, err)
			}
		}()
	}
	if e.RecordDir != "" {
		e.start()
		// Written before the first connection is served: a run's end that
		// finds no record knows its proxy never served one (WaitRecord).
		stop, seen := catchStop(), e.live.changes.Load()
		e.writeRecord(false)
		go e.keepRecord(stop, seen)
	}
	notify()
	return e.Serve(l)
}

// injector reads the credentials systemd put into the environment from the
// unit's environment file, deletes the file, and makes the session's CA.
func injector(c Config) (*Injector, error) {
	if c.Drop != "" {
		if err := sessionfile.Remove(c.Drop); err != nil {
			fmt.Fprintf(os.Stderr, "mosaic egress: %v\n", err)
		}
	}
	var roots *x509.CertPool
	if b64, ok := os.LookupEnv(UpstreamRootsVar); ok {
		pemData, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", UpstreamRootsVar, err)
		}
		if roots, err = ParseRoots(string(pemData)); err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "mosaic egress: session %s: checking injection hosts against test roots (%s), not the system's\n", c.Session, UpstreamRootsVar)
	}
	extraPEM, err := extraRoots(c)
	if err != nil {
		return nil, err
	}
	if len(extraPEM) > 0 {
		if roots == nil {
			if roots, err = x509.SystemCertPool(); err != nil || roots == nil {
				roots = x509.NewCertPool()
			}
		}
		if !roots.AppendCertsFromPEM(extraPEM) {
			return nil, fmt.Errorf("no certificate in the session's --ca-file (%s)", ExtraRootsVar)
		}
		fmt.Fprintf(os.Stderr, "mosaic egress: session %s: checking the hosts it reads against the system's roots and the session's --ca-file\n", c.Session)
	}
	// The values stay in this process's memory, and systemd gave them to it
	// in its initial environment, which /proc/PID/environ shows to every
	// process of the user that may ptrace it: not dumpable, it shows them
	// to none (the session cannot see this process at all; a core dump
	// would hold them too).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("cannot make the proxy undumpable: %w", err)
	}
	in, err := NewInjector(c.Session, c.Inject, c.Git, os.LookupEnv, roots)
	if in != nil {
		in.ExtraPEM = extraPEM
	}
	// The values now live in the injector only: nothing this process
	// starts (it starts nothing) or reads later finds them in its
	// environment.
	for _, r := range c.Inject {
		os.Unsetenv(r.Var)
		os.Unsetenv(PlaceholderPrefix + r.Var)
	}
	for i := range c.Git {
		os.Unsetenv(GitTokenVar(i))
		os.Unsetenv(GitUserVar(i))
		os.Unsetenv(GitPlaceholderVar(i))
	}
	os.Unsetenv(UpstreamRootsVar)
	os.Unsetenv(ExtraRootsVar)
	if err != nil {
		return nil, err
	}
	for _, r := range c.Inject {
		fmt.Fprintf(os.Stderr, "mosaic egress: session %s: puts %s into %s for %s\n", c.Session, r.Var, strings.Join(r.Headers, ", "), strings.Join(r.Hosts, ", "))
	}
	for _, g := range c.Git {
		fmt.Fprintf(os.Stderr, "mosaic egress: session %s: lends a git credential for %s (%s)\n", c.Session, g.URL(), strings.Join(g.Ops, ", "))
	}
	return in, nil
}

// extraRoots are the session's --ca-file certificates: from the proxy's
// environment file (ExtraRootsVar), or, for a proxy that gets none, the
// file mosaic left beside its socket (WritePlaceholders); nil for none.
func extraRoots(c Config) ([]byte, error) {
	if b64, ok := os.LookupEnv(ExtraRootsVar); ok {
		pemData, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ExtraRootsVar, err)
		}
		return pemData, nil
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(c.Socket), ExtraFile))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return b, nil
}

// AliveFile is the file in the egress directory a running proxy holds
// locked (acceptloop.HoldAlive): whether it started and whether it runs,
// which its socket cannot tell when systemd holds it (socket activation).
const AliveFile = "proxy.alive"

// listeners are the proxy's socket and its control socket (nil without
// one): those systemd passed it (socket activation, ListenFDs), or made
// here.
func listeners(c Config) (l, cl net.Listener, err error) {
	if passed := ListenFDs(); len(passed) > 0 {
		for _, p := range passed {
			switch p.Addr().String() {
			case c.Socket:
				l = p
			case filepath.Join(c.Control, ControlSocketName):
				cl = p
			default:
				p.Close()
			}
		}
		if l == nil || (c.Control != "" && cl == nil) {
			return nil, nil, fmt.Errorf("systemd passed no socket at %s or its control socket", c.Socket)
		}
		return l, cl, nil
	}
	os.Remove(c.Socket)
	if l, err = net.Listen("unix", c.Socket); err != nil {
		return nil, nil, err
	}
	_ = os.Chmod(c.Socket, 0o600)
	if c.Control != "" {
		if cl, err = listenControl(c.Control); err != nil {
			return nil, nil, fmt.Errorf("cannot make the control socket: %w", err)
		}
	}
	return l, cl, nil
}

// ListenFDs are the listening sockets systemd passed this process
// (LISTEN_FDS from descriptor 3, for LISTEN_PID, this process), which it
// takes: the variables are unset and each descriptor is close-on-exec.
func ListenFDs() []net.Listener {
	pid, n := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS")
	os.Unsetenv("LISTEN_PID")
	os.Unsetenv("LISTEN_FDS")
	os.Unsetenv("LISTEN_FDNAMES")
	count, err := strconv.Atoi(n)
	if err != nil || pid != strconv.Itoa(os.Getpid()) {
		return nil
	}
	var ls []net.Listener
	for fd := 3; fd < 3+count; fd++ {
		unix.CloseOnExec(fd)
		f := os.NewFile(uintptr(fd), "listen")
		l, err := net.FileListener(f)
		f.Close() // FileListener holds a copy
		if err == nil {
			ls = append(ls, l)
		}
	}
	return ls
}
