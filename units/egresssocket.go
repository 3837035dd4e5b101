package units

import (
	"path/filepath"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"mosaic/internal/testhook"
	"mosaic/sandbox"
	"mosaic/sandbox/egress"
)

// A session's egress proxy is started by systemd on the first connection
// to it (socket activation), not with the session: a transient socket unit
// (egressSocketProperties) holds the proxy's socket and its control
// socket from the session's start, in systemd's own loop (no process), and
// its service, of the same name, is made with it but started only when a
// session's connection or a `mosaic allow` arrives (it takes both sockets,
// egress.ListenFDs). A session that makes no connection costs no proxy:
// issue 39's bound of 5 ms on a default session's start.

// EgressSocketUnitName is the socket unit of session name's egress proxy.
func EgressSocketUnitName(name string) string {
	return UnitPrefix + name + "-egress" + SocketSuffix
}

// SocketSuffix ends a socket unit's name.
const SocketSuffix = ".socket"

// EgressSocketUnit is the socket unit of s's egress proxy.
func (s Spec) EgressSocketUnit() string { return EgressSocketUnitName(s.Name) }

// EgressActivated reports whether s's egress proxy is started on the first
// connection (network allow): all but a proxy that makes a CA the command
// must trust from its start (Intercepts: keys injected, git lent, a
// registry read), which starts first. MOSAIC_TEST_EGRESS_UP_FRONT=1 (the
// hooked build only) starts every proxy with its session, as before.
func (s Spec) EgressActivated() bool {
	return s.Network == sandbox.NetworkAllow && !s.Intercepts() && !testhook.Flag("MOSAIC_TEST_EGRESS_UP_FRONT")
}

// listenEntry is one socket of a socket unit's Listen property: its kind
// (Stream for ListenStream=) and address (a path: a Unix socket).
type listenEntry struct {
	Type, Address string
}

// egressSocketProperties are the properties of the socket unit of s's
// egress proxy: its socket (which the session's relay and device dial)
// and its control socket (mosaic allow), both 0600 in directories mosaic
// made (the control one 0700, which no session binds), removed when it
// stops; stopped once the session no longer needs it, which stops the
// proxy (BindsTo=, activatedProperties).
func egressSocketProperties(s Spec) []sd.Property {
	listen := []listenEntry{{"Stream", filepath.Join(s.EgressDir, sandbox.EgressSocketName)}}
	if c := egress.ControlDir(s.EgressDir); c != "" {
		listen = append(listen, listenEntry{"Stream", filepath.Join(c, egress.ControlSocketName)})
	}
	return []sd.Property{
		prop("Description", "mosaic egress proxy's sockets of session "+s.Name),
		prop("Listen", listen),
		prop("SocketMode", uint32(0o600)),
		prop("DirectoryMode", uint32(0o700)),
		prop("RemoveOnStop", true),
		prop("StopWhenUnneeded", true),
		prop("CollectMode", "inactive-or-failed"),
	}
}

// activatedProperties turn a proxy's properties (props) into those of one
// its socket unit starts: not stopped as unneeded (nothing but the socket
// needs it), but part of its socket unit, which stops it once the session
// has ended (PartOf=: BindsTo= would keep the socket needed, and both would
// outlive the session); and a proxy that dies stops its socket unit, which
// stops the session (BindsTo=), as a dead proxy always did: the session is
// not left with a network that would start a second proxy, with none of
// the first one's grants.
func activatedProperties(s Spec, props []sd.Property) []sd.Property {
	out := props[:0:0]
	for _, p := range props {
		if p.Name != "StopWhenUnneeded" {
			out = append(out, p)
		}
	}
	sock := []string{s.EgressSocketUnit()}
	out = append(out, prop("PartOf", sock), prop("After", sock))
	// MOSAIC_TEST_EGRESS_REQUIRES=1 (the hooked build only): the weakened
	// mosaic whose session runs on when its proxy dies (and whose session
	// is Requires= its socket unit: testProperties).
	if testhook.Flag("MOSAIC_TEST_EGRESS_REQUIRES") {
		return out
	}
	return append(out, prop("PropagatesStopTo", sock))
}
