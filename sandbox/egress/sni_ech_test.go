package egress

import (
	"bufio"
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"
)

// TestTunnelSNIEncryptedHello: a ClientHello whose outer name is the
// tunnel's host but that carries an Encrypted Client Hello (ECH) naming
// another host passes the SNI gate, and a CDN that takes ECH (Cloudflare,
// which fronts registry.npmjs.org) serves the inner name: the gate reads
// the outer hello only. Here a tls.Server with the ECH key stands for the
// CDN and sees registry.npmjs.org through a tunnel to front.example.
//
// Skipped, open: refusing every hello with the ECH extension would also
// refuse Chrome's and Firefox's (a browser an agent drives), which send a
// GREASE ECH extension on every connection, indistinguishable from a real
// one by design.
func TestTunnelSNIEncryptedHello(t *testing.T) {
	t.Skip("open hole: ECH hides the inner SNI from the tunnel's gate (see the comment)")
	key, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	config := echConfig(7, "front.example", key.PublicKey().Bytes())
	list := binary.BigEndian.AppendUint16(nil, uint16(len(config)))
	list = append(list, config...)

	// The session's side: TLS 1.3 with ECH, the outer hello naming the
	// tunnel's host (the config's public name), the inner the registry.
	sessionEnd, gateEnd := net.Pipe()
	defer sessionEnd.Close()
	go tls.Client(sessionEnd, &tls.Config{ServerName: "registry.npmjs.org", MinVersion: tls.VersionTLS13,
		EncryptedClientHelloConfigList: list, InsecureSkipVerify: true}).Handshake()
	remote, cdn := net.Pipe()
	defer cdn.Close()
	e := &Egress{Session: "s", live: newLive()}
	g := &helloGate{e: e, hp: "front.example:443", r: bufio.NewReader(gateEnd), remote: remote}
	passed := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 64<<10)
		gateEnd.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _ := g.Read(buf)
		passed <- buf[:n]
	}()
	hello := <-passed
	if len(hello) == 0 {
		return // refused: the gate held
	}
	// What the gate let through, to a server that holds the ECH key.
	inner := make(chan string, 1)
	go func() {
		tls.Server(helloConn{bytes.NewReader(hello)}, &tls.Config{
			EncryptedClientHelloKeys: []tls.EncryptedClientHelloKey{{Config: config, PrivateKey: key.Bytes()}},
			GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
				inner <- h.ServerName
				return nil, errors.New("seen")
			}}).Handshake()
		close(inner)
	}()
	t.Fatalf("a hello with ECH through the tunnel to front.example passed the gate; the server behind it was asked for %q", <-inner)
}

// echConfig is one ECHConfig (draft-ietf-tls-esni-18, version 0xfe0d):
// an X25519 key, HKDF-SHA256 and AES-128-GCM, and its public name.
func echConfig(id byte, publicName string, pub []byte) []byte {
	var c []byte
	c = append(c, id)
	c = binary.BigEndian.AppendUint16(c, 0x0020) // DHKEM(X25519, HKDF-SHA256)
	c = binary.BigEndian.AppendUint16(c, uint16(len(pub)))
	c = append(c, pub...)
	c = binary.BigEndian.AppendUint16(c, 4)
	c = binary.BigEndian.AppendUint16(c, 0x0001) // HKDF-SHA256
	c = binary.BigEndian.AppendUint16(c, 0x0001) // AES-128-GCM
	c = append(c, 0)                             // maximum_name_length
	c = append(c, byte(len(publicName)))
	c = append(c, publicName...)
	c = binary.BigEndian.AppendUint16(c, 0) // no extensions
	out := binary.BigEndian.AppendUint16(nil, 0xfe0d)
	out = binary.BigEndian.AppendUint16(out, uint16(len(c)))
	return append(out, c...)
}
