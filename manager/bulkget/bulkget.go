// Package bulkget reads many of systemd's D-Bus properties at once (mosaic
// list: a Get per property and session, 1,200 at 200 sessions) over a
// connection of its own to the manager's private socket, on which mosaic
// encodes the calls and decodes the answers itself.
// Through godbus each call cost the CLI more CPU than systemd spent
// answering it (reflection, a header map, a goroutine handoff and four
// system calls per call): at 200 sessions the CLI's CPU, not systemd, set
// how long mosaic list took. Here a call is a few hundred bytes appended to
// a buffer, written some sixty at a time, and the answers are read in large
// reads. Only Properties.Get of the types sessions' properties have (s, o, u,
// i, t, x, b, ay) is understood; an error answer or another type leaves the
// property out, as a failed Get does over godbus.
package bulkget

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
)

// Get is one property to read: the object, its interface, the property.
type Get struct {
	Path        dbus.ObjectPath
	Iface, Name string
}

// bulkChunk is how much is written at once: some sixty calls, so that
// systemd works on them while the next ones are encoded.
const bulkChunk = 16 << 10

// maxBulkMessage bounds an answer's header and body.
const maxBulkMessage = 1 << 20

// Read reads every get over a new connection to addr, where systemd's
// manager answers directly (its private socket: no bus, so no Hello); the
// answer at i is get i's value, nil where there is none. Connecting and
// authenticating take at most dial; the whole ends by ctx's deadline, or
// after timeout if that comes first.
func Read(ctx context.Context, addr string, dial, timeout time.Duration, gets []Get) ([]any, error) {
	path, ok := unixPath(addr)
	if !ok {
		return nil, errors.New("not a unix:path= address: " + addr)
	}
	deadline := time.Now().Add(timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	d := net.Dialer{Timeout: dial, Deadline: deadline}
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// ctx bounds the whole, not only the dial: cancelled (Ctrl-C), it
	// closes the connection, which ends every read and write below.
	defer context.AfterFunc(ctx, func() { c.Close() })()
	// Authenticating is part of connecting: something at addr that takes
	// the connection and never answers costs dial, not the whole timeout,
	// which the caller's fallback then has.
	handshake := time.Now().Add(dial)
	if handshake.After(deadline) {
		handshake = deadline
	}
	_ = c.SetDeadline(handshake)
	r := bufio.NewReaderSize(c, 64<<10)
	// SASL EXTERNAL: the server checks the uid against the socket's
	// credentials. BEGIN goes with the first messages.
	uid := hex.EncodeToString([]byte(strconv.Itoa(os.Getuid())))
	if _, err := c.Write([]byte("\x00AUTH EXTERNAL " + uid + "\r\n")); err != nil {
		return nil, err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "OK ") {
		return nil, fmt.Errorf("authentication refused: %q", strings.TrimSpace(line))
	}
	_ = c.SetDeadline(deadline)
	buf := []byte("BEGIN\r\n")
	const first = 1 // the serial of gets[0]
	written := make(chan error, 1)
	go func() {
		for i, g := range gets {
			buf = appendCall(buf, first+uint32(i), "org.freedesktop.systemd1", string(g.Path), "org.freedesktop.DBus.Properties", "Get", "ss", []string{g.Iface, g.Name})
			if len(buf) >= bulkChunk {
				if _, err := c.Write(buf); err != nil {
					written <- err
					return
				}
				buf = buf[:0]
			}
		}
		_, err := c.Write(buf)
		written <- err
	}()
	out := make([]any, len(gets))
	for left := len(gets); left > 0; {
		typ, replyTo, order, body, err := readMessage(r)
		if err != nil {
			c.Close() // ends the writer too
			<-written
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		i := int(replyTo - first)
		if (typ != msgReturn && typ != msgError) || replyTo < first || i >= len(gets) {
			continue // a signal (systemd sends its own on a private connection unasked)
		}
		left--
		if typ == msgReturn {
			out[i], _ = parseVariant(body, order)
		}
	}
	return out, <-written
}

// unixPath is the socket path of a "unix:path=P[,guid=...]" address.
func unixPath(addr string) (string, bool) {
	rest, ok := strings.CutPrefix(addr, "unix:")
	if !ok || strings.Contains(rest, ";") {
		return "", false
	}
	for _, kv := range strings.Split(rest, ",") {
		if p, ok := strings.CutPrefix(kv, "path="); ok && p != "" && !strings.Contains(p, "%") {
			return p, true
		}
	}
	return "", false
}

// D-Bus message types and header fields (the D-Bus specification, "Message
// Format").
const (
	msgCall   = 1
	msgReturn = 2
	msgError  = 3

	fieldPath        = 1
	fieldInterface   = 2
	fieldMember      = 3
	fieldReplySerial = 5
	fieldDestination = 6
	fieldSignature   = 8
)

// appendCall appends a little-endian method call whose body is the strings
// args, of signature sig ("" or "ss").
func appendCall(b []byte, serial uint32, dest, path, iface, member, sig string, args []string) []byte {
	start := len(b)
	le := binary.LittleEndian
	b = append(b, 'l', msgCall, 0, 1)
	b = le.AppendUint32(b, 0) // body length, set below
	b = le.AppendUint32(b, serial)
	b = le.AppendUint32(b, 0) // header fields' length, set below
	fields := len(b)
	field := func(code byte, typ byte, v string) {
		b = pad(b, start, 8)
		b = append(b, code, 1, typ, 0)
		if typ == 'g' {
			b = append(b, byte(len(v)))
		} else {
			b = le.AppendUint32(b, uint32(len(v)))
		}
		b = append(b, v...)
		b = append(b, 0)
	}
	field(fieldPath, 'o', path)
	field(fieldInterface, 's', iface)
	field(fieldMember, 's', member)
	field(fieldDestination, 's', dest)
	if sig != "" {
		field(fieldSignature, 'g', sig)
	}
	le.PutUint32(b[fields-4:], uint32(len(b)-fields))
	b = pad(b, start, 8)
	body := len(b)
	for _, a := range args {
		b = pad(b, start, 4)
		b = le.AppendUint32(b, uint32(len(a)))
		b = append(b, a...)
		b = append(b, 0)
	}
	le.PutUint32(b[start+4:], uint32(len(b)-body))
	return b
}

// pad appends zeros up to the next multiple of n, counted from start.
func pad(b []byte, start, n int) []byte {
	for (len(b)-start)%n != 0 {
		b = append(b, 0)
	}
	return b
}

// readMessage reads one message and returns its type, the serial it
// answers (0 if none), its byte order (the sender's: sd-bus answers in
// its own, whatever a call's) and its body.
func readMessage(r io.Reader) (typ byte, replyTo uint32, order binary.ByteOrder, body []byte, err error) {
	var fixed [16]byte
	if _, err = io.ReadFull(r, fixed[:]); err != nil {
		return 0, 0, nil, nil, err
	}
	switch fixed[0] {
	case 'l':
		order = binary.LittleEndian
	case 'B':
		order = binary.BigEndian
	default:
		return 0, 0, nil, nil, errors.New("not a D-Bus message")
	}
	bodyLen, fieldsLen := order.Uint32(fixed[4:]), order.Uint32(fixed[12:])
	if bodyLen > maxBulkMessage || fieldsLen > maxBulkMessage {
		return 0, 0, nil, nil, errors.New("a D-Bus message too long")
	}
	headerLen := 16 + int(fieldsLen)
	headerLen += (8 - headerLen%8) % 8
	msg := make([]byte, headerLen+int(bodyLen))
	copy(msg, fixed[:])
	if _, err = io.ReadFull(r, msg[16:]); err != nil {
		return 0, 0, nil, nil, err
	}
	p := &wire{b: msg[:16+fieldsLen], order: order, off: 16}
	for p.off < len(p.b) {
		p.align(8)
		code := p.byte()
		sig := p.sig()
		if code == fieldReplySerial && sig == "u" {
			replyTo = p.uint32()
			continue
		}
		p.skip(sig)
		if p.err != nil {
			return 0, 0, nil, nil, p.err
		}
	}
	if p.err != nil {
		return 0, 0, nil, nil, p.err
	}
	return fixed[1], replyTo, order, msg[headerLen:], nil
}

// parseVariant decodes a Get's answer, a variant in byte order order, into
// the Go type godbus gives (string, uint32, int32, uint64, int64, bool,
// []byte).
func parseVariant(body []byte, order binary.ByteOrder) (any, error) {
	p := &wire{b: body, order: order}
	return p.variant()
}

// wire reads the D-Bus wire format from b, offsets counted from the
// message's start (alignment is relative to it); the first error sticks.
type wire struct {
	b     []byte
	order binary.ByteOrder
	off   int
	err   error
}

func (p *wire) need(n int) bool {
	if p.err == nil && (n < 0 || p.off+n > len(p.b)) {
		p.err = errors.New("a D-Bus message cut short")
	}
	return p.err == nil
}

func (p *wire) align(n int) {
	if a := (n - p.off%n) % n; p.need(a) {
		p.off += a
	}
}

func (p *wire) byte() byte {
	if !p.need(1) {
		return 0
	}
	p.off++
	return p.b[p.off-1]
}

func (p *wire) uint32() uint32 {
	p.align(4)
	if !p.need(4) {
		return 0
	}
	p.off += 4
	return p.order.Uint32(p.b[p.off-4:])
}

func (p *wire) uint64() uint64 {
	p.align(8)
	if !p.need(8) {
		return 0
	}
	p.off += 8
	return p.order.Uint64(p.b[p.off-8:])
}

func (p *wire) bytes(n int) []byte {
	if !p.need(n) {
		return nil
	}
	p.off += n
	return p.b[p.off-n : p.off]
}

func (p *wire) str() string {
	n := int(p.uint32())
	s := p.bytes(n + 1) // and its NUL
	if len(s) == 0 {
		return ""
	}
	return string(s[:n])
}

func (p *wire) sig() string {
	n := int(p.byte())
	s := p.bytes(n + 1)
	if len(s) == 0 {
		return ""
	}
	return string(s[:n])
}

// skip passes a header field's value.
func (p *wire) skip(sig string) {
	switch sig {
	case "s", "o":
		p.str()
	case "g":
		p.sig()
	case "u", "h":
		p.uint32()
	default:
		if p.err == nil {
			p.err = fmt.Errorf("a D-Bus header field of type %q", sig)
		}
	}
}

func (p *wire) variant() (any, error) {
	sig := p.sig()
	var v any
	switch sig {
	case "s":
		v = p.str()
	case "o":
		v = dbus.ObjectPath(p.str())
	case "u":
		v = p.uint32()
	case "i":
		v = int32(p.uint32())
	case "b":
		v = p.uint32() != 0
	case "t":
		v = p.uint64()
	case "x":
		v = int64(p.uint64())
	case "ay":
		n := int(p.uint32())
		v = append([]byte{}, p.bytes(n)...)
	default:
		return nil, fmt.Errorf("a property of type %q", sig)
	}
	if p.err != nil {
		return nil, p.err
	}
	return v, nil
}
