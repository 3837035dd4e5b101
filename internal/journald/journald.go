// Package journald writes structured entries to the journal over its
// native protocol (systemd's journal socket, one datagram per entry), for
// the audit events a team collects with journald's own tools: each kind of
// event has a stable MESSAGE_ID (a 128-bit ID, as journald wants it), which
// the catalog beside this file (mosaic.catalog, installed by `make install`)
// explains to `journalctl -x`, and its facts in fields of their own
// (MOSAIC_*). Who wrote an entry is the journal's to say, in the fields it
// sets itself (_SYSTEMD_USER_UNIT, _PID, _COMM), which no client can write:
// a reader trusts an event only from the unit that writes that kind.
package journald

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// Socket is journald's native socket.
const Socket = "/run/systemd/journal/socket"

// The audit events' MESSAGE_IDs: each names one kind of event, for good
// (a test keeps the catalog's entries the same).
const (
	// EgressGrant: a running session's allowlist got an entry (mosaic
	// allow), by whom, until when. Written by its egress proxy.
	EgressGrant = "fb15f37f7ada4d66ba16e8e69008014b"
	// EgressRevoke: an entry was taken back (mosaic deny), by whom.
	EgressRevoke = "835232a14e4f4091b0c1570d3cfa3250"
	// EgressExpire: a grant with --for ended by itself.
	EgressExpire = "593c780d66804bc0a62386e0912aa9e4"
	// EgressRefused: the proxy refused a destination (host, port, why).
	EgressRefused = "5422b4fc46424a9a894595d6e5b53b12"
	// EgressConnection: a connection the proxy let through ended (host,
	// port, bytes each way; for a request it put a key in, the method and
	// path, never the key).
	EgressConnection = "6e6d2d6c127d479e9a23909441e4fd03"
	// ChangeApplied: a clone-mode session's change went into the checkout
	// (mosaic apply), written by that mosaic command.
	ChangeApplied = "e8ba659203d34a2f864ed416546f5dcd"
	// ChangeDiscarded: a change was thrown away (mosaic discard).
	ChangeDiscarded = "33de98c9710a47238e09b8202d2ae883"
	// BusLaunch: the bus started a session for a permitted session.
	BusLaunch = "10777120be704808a4626b6993185eb5"
	// SSHAgentUse: a session's request to the ssh agent it was lent
	// (key, destination, operation, allowed or refused and why). Written
	// by its agent filter.
	SSHAgentUse = "9b1c2e4f7d8a4e06a3c5b1f0e2d47a61"
	// GitLendUse: a session's request to a git host a credential was lent
	// for (--lend-git: repository, operation, refs, allowed or refused and
	// why). Written by its egress proxy.
	GitLendUse = "db73245eae504d8dbdcf0e936fee7b35"
)

// IDs are every audit event's MESSAGE_ID.
var IDs = []string{EgressGrant, EgressRevoke, EgressExpire, EgressRefused, EgressConnection, ChangeApplied, ChangeDiscarded, BusLaunch, SSHAgentUse, GitLendUse}

// Identifier is the SYSLOG_IDENTIFIER of every audit entry, so that
// `journalctl -t mosaic-audit` lists them (and `mosaic logs --egress`,
// which reads the proxy's own identifier, shows its lines once).
const Identifier = "mosaic-audit"

// Field is one KEY=VALUE of an entry. A key is journald's: A-Z, 0-9 and
// _, not starting with _ (those are the journal's own, trusted fields).
type Field struct{ Key, Value string }

// Encode writes fields in the native protocol: KEY=VALUE lines, or, for a
// value holding a newline, KEY, a newline, its length as 64-bit little
// endian and the value.
func Encode(fields []Field) ([]byte, error) {
	var b bytes.Buffer
	for _, f := range fields {
		if !validKey(f.Key) {
			return nil, fmt.Errorf("journal field %q: a key is A-Z, 0-9 and _, not starting with _", f.Key)
		}
		if !strings.Contains(f.Value, "\n") {
			b.WriteString(f.Key + "=" + f.Value + "\n")
			continue
		}
		b.WriteString(f.Key + "\n")
		_ = binary.Write(&b, binary.LittleEndian, uint64(len(f.Value)))
		b.WriteString(f.Value + "\n")
	}
	return b.Bytes(), nil
}

// validKey reports whether k is a key a client may write.
func validKey(k string) bool {
	if k == "" || len(k) > 64 || k[0] == '_' || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for _, c := range k {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Send writes one entry to journald's socket. An entry over what one
// datagram carries (journald's large entries need a memfd) is refused:
// audit entries are a few hundred bytes.
func Send(fields []Field) error {
	data, err := Encode(fields)
	if err != nil {
		return err
	}
	if len(data) > 64<<10 {
		return fmt.Errorf("a journal entry of %d bytes is more than one datagram mosaic sends", len(data))
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: Socket, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write(data)
	return err
}

// Caller names this process for an event's MOSAIC_BY or a record: its
// uid, pid and mosaic's command (never the rest of its arguments, which
// may name what a user would not log).
func Caller() string {
	verb := ""
	for _, a := range os.Args[1:] {
		if !strings.HasPrefix(a, "-") {
			verb = " " + a
			break
		}
	}
	return fmt.Sprintf("uid %d, pid %d (%s%s)", os.Getuid(), os.Getpid(), filepath.Base(os.Args[0]), verb)
}

// Event sends one audit event of session: kind (its MESSAGE_ID), event
// (MOSAIC_EVENT), the sentence after "mosaic audit: ", and its fields.
func Event(id, session, event, message string, fields ...Field) error {
	return Send(EventFields(id, session, event, message, fields...))
}

// EventFields are the fields of an audit event (Event): its kind, its
// sentence, mosaic's identifier and the session, then fields.
func EventFields(id, session, event, message string, fields ...Field) []Field {
	return append([]Field{
		{Key: "MESSAGE_ID", Value: id}, {Key: "MESSAGE", Value: "mosaic audit: " + message}, {Key: "PRIORITY", Value: "5"},
		{Key: "SYSLOG_IDENTIFIER", Value: Identifier}, {Key: "MOSAIC_SESSION", Value: session}, {Key: "MOSAIC_EVENT", Value: event},
	}, fields...)
}
