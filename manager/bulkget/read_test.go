package bulkget

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// fakeManager answers on a unix socket as systemd's private socket does,
// with what a busy manager sends there besides: its signals, unasked
// (PropertiesChanged, JobRemoved as sessions start and stop), before every
// answer; the answers in reverse order, one of them big-endian (a
// manager's native order), one an error; and an answer to a call nobody
// made. answer gives the value of call i (nil: an error).
func fakeManager(t *testing.T, n int, answer func(i int) any) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "bg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "private")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		if _, err := r.ReadString('\n'); err != nil {
			return
		}
		c.Write([]byte("OK 0123456789abcdef0123456789abcdef\r\n"))
		if line, err := r.ReadString('\n'); err != nil || line != "BEGIN\r\n" {
			t.Errorf("after OK: %q, %v", line, err)
			return
		}
		var serials []uint32
		for i := 0; i < n; i++ {
			m, err := dbus.DecodeMessage(r)
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			serials = append(serials, m.Serial())
		}
		w := bufio.NewWriter(c)
		send := func(m *dbus.Message, order binary.ByteOrder) {
			if err := m.EncodeTo(w, order); err != nil {
				t.Errorf("encoding: %v", err)
			}
		}
		path := dbus.ObjectPath("/org/freedesktop/systemd1/unit/mosaic_2dx_2eservice")
		for i := n - 1; i >= 0; i-- {
			send(&dbus.Message{Type: dbus.TypeSignal, Headers: map[dbus.HeaderField]dbus.Variant{
				dbus.FieldPath: dbus.MakeVariant(path), dbus.FieldInterface: dbus.MakeVariant("org.freedesktop.DBus.Properties"),
				dbus.FieldMember: dbus.MakeVariant("PropertiesChanged"), dbus.FieldSignature: dbus.MakeVariant(dbus.SignatureOf("", map[string]dbus.Variant{}, []string{})),
			}, Body: []any{"org.freedesktop.systemd1.Unit", map[string]dbus.Variant{"ActiveState": dbus.MakeVariant("active"), "MainPID": dbus.MakeVariant(uint32(7))}, []string{"Conditions"}}}, binary.LittleEndian)
			send(&dbus.Message{Type: dbus.TypeSignal, Headers: map[dbus.HeaderField]dbus.Variant{
				dbus.FieldPath: dbus.MakeVariant(dbus.ObjectPath("/org/freedesktop/systemd1")), dbus.FieldInterface: dbus.MakeVariant("org.freedesktop.systemd1.Manager"),
				dbus.FieldMember: dbus.MakeVariant("JobRemoved"), dbus.FieldSignature: dbus.MakeVariant(dbus.SignatureOf(uint32(0), dbus.ObjectPath(""), "", "")),
			}, Body: []any{uint32(i), dbus.ObjectPath("/org/freedesktop/systemd1/job/1"), "mosaic-x.service", "done"}}, binary.LittleEndian)
			v := answer(i)
			if v == nil {
				send(&dbus.Message{Type: dbus.TypeError, Headers: map[dbus.HeaderField]dbus.Variant{
					dbus.FieldReplySerial: dbus.MakeVariant(serials[i]), dbus.FieldErrorName: dbus.MakeVariant("org.freedesktop.DBus.Error.UnknownProperty"),
					dbus.FieldSignature: dbus.MakeVariant(dbus.SignatureOf("")),
				}, Body: []any{"no such property"}}, binary.LittleEndian)
				continue
			}
			order := binary.ByteOrder(binary.LittleEndian)
			if i == 1 {
				order = binary.BigEndian
			}
			send(&dbus.Message{Type: dbus.TypeMethodReply, Headers: map[dbus.HeaderField]dbus.Variant{
				dbus.FieldReplySerial: dbus.MakeVariant(serials[i]), dbus.FieldSignature: dbus.MakeVariant(dbus.SignatureOf(dbus.MakeVariant(v))),
			}, Body: []any{dbus.MakeVariant(v)}}, order)
		}
		send(&dbus.Message{Type: dbus.TypeMethodReply, Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldReplySerial: dbus.MakeVariant(serials[n-1] + 100), dbus.FieldSignature: dbus.MakeVariant(dbus.SignatureOf(dbus.MakeVariant(""))),
		}, Body: []any{dbus.MakeVariant("not asked")}}, binary.LittleEndian)
		w.Flush()
		// Then, as a manager would, it stays: the read must not wait on it.
		time.Sleep(5 * time.Second)
	}()
	return "unix:path=" + path
}

// Read pairs each answer with its call by serial, whatever comes between
// or around them, in either byte order.
func TestReadAmidSignals(t *testing.T) {
	values := []any{"active", uint32(4242), uint64(1700000000123456), int64(-3), true, []byte{1, 2, 3}, dbus.ObjectPath("/org/freedesktop/systemd1/unit/x"), nil, int32(-7), "success"}
	gets := make([]Get, len(values))
	for i := range gets {
		gets[i] = Get{Path: "/org/freedesktop/systemd1/unit/mosaic_2dx_2eservice", Iface: "org.freedesktop.systemd1.Service", Name: "P"}
	}
	addr := fakeManager(t, len(gets), func(i int) any { return values[i] })
	began := time.Now()
	got, err := Read(context.Background(), addr, time.Second, 3*time.Second, gets)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("Read took %v: it waited for more than its answers", took)
	}
	if !reflect.DeepEqual(got, values) {
		t.Errorf("got  %#v\nwant %#v", got, values)
	}
}

// A Read whose context is cancelled after the dial ends then, with the
// context's error, not when its timeout passes: a manager that took the
// calls and never answers holds no list past a Ctrl-C.
func TestReadEndsWithItsContext(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "private")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		if _, err := r.ReadString('\n'); err != nil {
			return
		}
		c.Write([]byte("OK 0123456789abcdef0123456789abcdef\r\n"))
		_, _ = io.Copy(io.Discard, r) // takes every call, answers none
	}()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	began := time.Now()
	_, err = Read(ctx, "unix:path="+path, time.Second, 30*time.Second, []Get{{Path: "/org/freedesktop/systemd1", Iface: "org.freedesktop.systemd1.Manager", Name: "Version"}})
	if !errors.Is(err, context.Canceled) || time.Since(began) > 5*time.Second {
		t.Errorf("Read = %v after %s, want context.Canceled soon after the cancel", err, time.Since(began))
	}
}
