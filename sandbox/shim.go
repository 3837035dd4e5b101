package sandbox

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"mosaic/internal/sessionfile"
)

// The exec shim is a service's main process:
//
//	mosaic exec-bwrap --promise P [--drop FILE] [--init-args FILE] [--home-store DIR] BWRAP [ARG...]
//
// It checks the outer layer (the unit's) against the promise read on the
// host, deletes the credential file systemd has read into its environment,
// and becomes bwrap (ExecBwrap). Shim.Argv writes that command line and
// ShimMain reads it. A scope has none: mosaic starts its bwrap itself (Held).

// ShimStage is the shim's name: mosaic's first argument.
const ShimStage = "exec-bwrap"

// Shim is one exec shim's command line.
type Shim struct {
	Promise string // the encoded Promise
	Drop    string // the session's credential file, deleted once read; "" for none
	// InitArgs is a file of the init's arguments after "init" (NUL-ended
	// each), which Args then end without; "" when Args hold them.
	InitArgs string
	// HomeStore is the session's state directory, which the shim opens
	// and hands to the init (HomeFDEnv) to load and save its home; "" for
	// none.
	HomeStore string
	Bwrap     string // bwrap's path
	// TUN: make the session's network device and its DNS sockets and hand
	// them to the init (passNetwork), with the unit's capabilities, which
	// the shim then drops.
	TUN  bool
	Args []string
}

// Argv is the shim's command line, run as mosaicBin.
func (s Shim) Argv(mosaicBin string) []string {
	argv := []string{mosaicBin, ShimStage, "--promise", s.Promise}
	if s.Drop != "" {
		argv = append(argv, "--drop", s.Drop)
	}
	if s.InitArgs != "" {
		argv = append(argv, "--init-args", s.InitArgs)
	}
	if s.HomeStore != "" {
		argv = append(argv, "--home-store", s.HomeStore)
	}
	if s.TUN {
		argv = append(argv, "--tun")
	}
	return append(append(argv, s.Bwrap), s.Args...)
}

// ParseShim reads the shim's command line, after its name.
func ParseShim(args []string) (Shim, error) {
	var s Shim
	for len(args) > 1 && len(args[0]) > 2 && args[0][:2] == "--" {
		if args[0] == "--tun" {
			s.TUN, args = true, args[1:]
			continue
		}
		switch args[0] {
		case "--promise":
			s.Promise = args[1]
		case "--drop":
			s.Drop = args[1]
		case "--init-args":
			s.InitArgs = args[1]
		case "--home-store":
			s.HomeStore = args[1]
		default:
			return s, fmt.Errorf("unknown option %q", args[0])
		}
		args = args[2:]
	}
	if len(args) == 0 {
		return s, fmt.Errorf("usage: %s --promise P [--drop FILE] [--init-args FILE] [--home-store DIR] [--tun] BWRAP [ARG...]", ShimStage)
	}
	if s.Promise == "" {
		return s, fmt.Errorf("no --promise: nothing to check the sandbox against")
	}
	s.Bwrap, s.Args = args[0], args[1:]
	return s, nil
}

// ShimMain runs the shim with the arguments after its name: it checks the
// outer layer, deletes the credential file and becomes bwrap. It returns only on failure, and the
// caller exits with ExitSandboxRefused: no partial sandbox ever runs.
func ShimMain(args []string) error {
	s, err := ParseShim(args)
	if err != nil {
		return err
	}
	if err := checkOuter(s.Promise); err != nil {
		return err
	}
	if s.InitArgs != "" {
		noteOutputLost(filepath.Join(filepath.Dir(s.InitArgs), OutputLostName))
	}
	if s.Drop != "" {
		// systemd has read the credentials (the link to the memfd mosaic
		// holds, credentials.Hold; a file, for a unit of a mosaic before
		// issue 31) into our environment: the link has no reason to exist
		// any more, and gone it cannot name another file once mosaic's
		// PID is reused.
		if err := sessionfile.Remove(s.Drop); err != nil {
			fmt.Fprintf(os.Stderr, "mosaic: %v\n", err)
		}
	}
	bwrapArgs, inline, err := initArgsAside(s)
	if err != nil {
		return err
	}
	env, err := InitEnv(os.Environ(), append([]string{s.Bwrap}, inline...))
	if err != nil {
		return err
	}
	if s.HomeStore != "" {
		if env, err = passHomeStore(s.HomeStore, env); err != nil {
			return err
		}
	}
	if s.TUN {
		if env, err = passNetwork(env); err != nil {
			return err
		}
	}
	return ExecBwrap(append([]string{s.Bwrap}, bwrapArgs...), env)
}

// checkOuter checks the outer layer against the promise read on the host,
// and hands the init the promise it must check in turn.
func checkOuter(encoded string) error {
	p, err := DecodePromise(encoded)
	if err != nil {
		return err
	}
	if err := CheckUnit(p); err != nil {
		return err
	}
	return os.Setenv(PromiseEnv, p.Inner().Encode())
}

// OutputLostName is the file in a service's state directory that says its
// output reached no journal (noteOutputLost); `mosaic logs` reports it.
const OutputLostName = "output-lost"

// noteOutputLost writes the file at path when the unit's stdout is
// /dev/null: what systemd gives a unit whose output is for the journal
// when it cannot reach journald (not running, its socket gone), instead of
// failing the start. The session's output is then lost, and nothing else
// would say so. (A mosaic run to /dev/null writes it too: logs has nothing
// to say of a run's output anyway.)
func noteOutputLost(path string) {
	var out, null unix.Stat_t
	if unix.Fstat(1, &out) != nil || unix.Stat(os.DevNull, &null) != nil {
		return
	}
	if out.Mode&unix.S_IFMT == unix.S_IFCHR && out.Rdev == null.Rdev {
		_ = os.WriteFile(path, nil, 0o600)
	}
}
