package sandbox

import (
	"fmt"
	"os"
	"strconv"
)

// A scope's sandbox has no exec shim: mosaic starts bwrap itself, with
// these descriptors (see Held).
const (
	ScopeInfoFD   = 3 // bwrap's --info-fd: {"child-pid": N}, the init's PID
	ScopeArgsFD   = 4 // the init's arguments (InitArgvFD)
	ScopeInitGoFD = 5 // the init's --go-fd, a socket: its byte once held, mosaic's once it is in the scope
)

// InitGoFD is the init's option naming the socket on which a scope's init,
// started before its scope, says it is held (it keeps every signal from
// then on) and then reads one byte before it does anything.
const InitGoFD = "--go-fd"

// Held is a scope's bwrap as mosaic starts it: bwrap reports the init's PID
// on ScopeInfoFD as soon as it has cloned it, builds the sandbox and runs
// the init, which waits for one byte on ScopeInitGoFD (InitGoFD), sent once
// mosaic has had systemd put it into the scope. bwrap's setup and the init's
// own start (a Go program's) thus overlap systemd's work, and nothing of the
// session runs outside its scope: the init checks its cgroup
// (Promise.Scope) before anything else, and refuses on EOF (mosaic gone
// while it was held).
type Held struct {
	Argv []string // bwrap's command line, argv[0] bwrap's path
	Env  []string // its environment: InitEnv's, with the promise
	Args *os.File // the init's arguments, to hand over as ScopeArgsFD and then close
}

// HoldBwrap makes a scope's Held from bwrap's command line (ending in
// "InitPath init"), the init's arguments after "init", the environment a
// unit would have had (the secrets among it) and the encoded promise.
func HoldBwrap(bwrapArgv, initArgs, environ []string, promise string) (Held, error) {
	n := len(bwrapArgv)
	if !endsInInit(bwrapArgv) {
		return Held{}, fmt.Errorf("bwrap's command line does not end in mosaic's init")
	}
	environ = append(environ[:len(environ):len(environ)], PromiseEnv+"="+promise)
	env, err := InitEnv(environ, append(bwrapArgv[:n:n], initArgs...))
	if err != nil {
		return Held{}, err
	}
	if Weakened {
		env = environ
	}
	f, err := sealedFile(EncodeInitArgs(initArgs))
	if err != nil {
		return Held{}, err
	}
	return Held{Argv: append(bwrapArgv[:n:n], InitArgvFD, strconv.Itoa(ScopeArgsFD)), Env: env, Args: f}, nil
}
