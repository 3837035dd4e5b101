package units

import (
	sd "github.com/coreos/go-systemd/v22/dbus"
)

// Launch is what a start makes for a plan's session, beside the plan
// (Spec), which it never changes: the handles its units are given. None of
// it is known when the plan is made; Render reads both.
type Launch struct {
	// CredentialFile is the environment file of the session's
	// credentials (Spec.Credentials), which systemd reads
	// (EnvironmentFiles=) and the init requires and passes on. The values
	// are never in a plan: the file is held in mosaic's memory while it
	// starts the unit, and its path (/proc/PID/fd/N, or a link to it in
	// the runtime directory) is set then (credentials.Hold).
	CredentialFile string
	// EgressCredentialFile is the egress proxy's own environment file
	// (the values of Spec.Inject's credentials and Spec.GitLends' tokens),
	// held as CredentialFile is.
	EgressCredentialFile string
	// InitArgsFile, when set, holds the init's arguments (the command's
	// among them) for the exec shim, rather than the unit's command line:
	// see InitArgs and sandbox.Shim.InitArgs. The start writes it into
	// the state directory it claimed (statedir.Prepare).
	InitArgsFile string
	// Stdio, when set, hands these descriptors to the unit as its stdin,
	// stdout and stderr (mosaic run), and the unit is collected once it
	// ended even when it failed: a finished run leaves nothing behind.
	Stdio *[3]int
	// TiePID, for a mosaic run, is the run's own PID: the session's unit
	// is BindsTo= the scope it is put in (the tie scope, Rendered.Tie), so
	// that the run's death stops the session.
	TiePID uint32
	// Attach, when set, is the master side of the session's terminal
	// (Stdio is its slave side), handed to the unit that holds it for
	// mosaic attach (start --pty).
	Attach *int
	// InitPID, for a scope, is the init bwrap made (ScopeBwrap), which
	// systemd adopts into the scope.
	InitPID uint32
}

// Rendered is everything systemd is sent for one session: its own unit
// and the units started with it in the same call (Aux: its egress proxy
// and the proxy's sockets, its publish forwarder, its ssh agent filter,
// the holder of its terminal), and, for a mosaic run, the tie scope
// started before it in a call of its own (manager/runtie.go).
type Rendered struct {
	Unit       string
	Properties []sd.Property
	Aux        []sd.PropertyCollection
	Tie        *sd.PropertyCollection
}

// Render is the one rendering of plan s as launched l on a user manager
// with features f: a service's unit (the promise naming the PID namespace
// of its own the unit gets where the manager has PrivatePIDs), or a
// scope's around l.InitPID.
func Render(s Spec, l Launch, f Features) Rendered {
	u := session{s, l}
	r := Rendered{Unit: s.Unit(), Aux: auxUnits(u)}
	if s.Scope {
		r.Properties = scopeProperties(u)
		return r
	}
	// The one fact of the promise a plan leaves to its manager: the unit
	// gets a PID namespace of its own where the manager has PrivatePIDs
	// (properties sends it), and the init checks it has.
	u.Promise.PIDs = !s.Landlock() && f.PrivatePIDs
	r.Properties = testProperties(properties(u, f))
	if l.TiePID != 0 {
		tie := tieScope(u)
		r.Tie = &tie
	}
	return testOldTie(r)
}

// session is a plan and its launch, as the unit builders read them.
type session struct {
	Spec
	Launch
}

// EndRecorded reports whether how the session ended is written into its
// state directory (end.json): by its ended stage, a service's ExecStopPost,
// or by mosaic for a scope it named. A one-shot run that mosaic named
// itself keeps no record: mosaic run reports the end and removes its state.
func EndRecorded(s Spec, l Launch) bool {
	if s.Scope {
		return s.NameGiven
	}
	return l.Stdio == nil || l.Attach != nil || s.NameGiven
}
