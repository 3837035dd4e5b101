package egress

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
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
}

// Argv is the egress unit's command line, argv[0] being the mosaic binary.
func (c Config) Argv(mosaicBin string) []string {
	argv := []string{mosaicBin, Stage, "--session", c.Session, "--socket", c.Socket}
	for _, a := range c.Allow {
		argv = append(argv, "--allow", a)
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
		default:
			return Config{}, fmt.Errorf("unknown option %s", args[0])
		}
		args = args[2:]
	}
	if c.Socket == "" || len(args) > 0 {
		return Config{}, errors.New("usage: egress --session NAME --socket PATH [--allow HOST[:PORT]]...")
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
	e := &Egress{Session: c.Session, Log: os.Stderr}
	if e.Allow, err = ParseAllow(c.Allow); err != nil {
		return err
	}
	os.Remove(c.Socket)
	l, err := net.Listen("unix", c.Socket)
	if err != nil {
		return err
	}
	_ = os.Chmod(c.Socket, 0o600)
	fmt.Fprintf(os.Stderr, "mosaic egress: session %s: allowing %s\n", e.Session, strings.Join(e.Allow.Strings(), ", "))
	notify()
	return e.Serve(l)
}
