package bulkget

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/godbus/dbus/v5"
)

// A call mosaic encodes itself is the call godbus reads back.
func TestBulkCallDecodes(t *testing.T) {
	b := []byte("BEGIN\r\n")
	b = appendCall(b, 1, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello", "", nil)
	b = appendCall(b, 42, "org.freedesktop.systemd1", "/org/freedesktop/systemd1/unit/mosaic_2dx_2eservice",
		"org.freedesktop.DBus.Properties", "Get", "ss", []string{"org.freedesktop.systemd1.Service", "MainPID"})
	r := bytes.NewReader(b[len("BEGIN\r\n"):])
	hello, err := dbus.DecodeMessage(r)
	if err != nil {
		t.Fatal(err)
	}
	if hello.Serial() != 1 || hello.Headers[dbus.FieldMember].Value() != "Hello" || len(hello.Body) != 0 {
		t.Errorf("Hello decodes as %v", hello)
	}
	get, err := dbus.DecodeMessage(r)
	if err != nil {
		t.Fatal(err)
	}
	want := map[dbus.HeaderField]any{
		dbus.FieldPath:        dbus.ObjectPath("/org/freedesktop/systemd1/unit/mosaic_2dx_2eservice"),
		dbus.FieldInterface:   "org.freedesktop.DBus.Properties",
		dbus.FieldMember:      "Get",
		dbus.FieldDestination: "org.freedesktop.systemd1",
		dbus.FieldSignature:   dbus.ParseSignatureMust("ss"),
	}
	for f, v := range want {
		if got := get.Headers[f].Value(); !reflect.DeepEqual(got, v) {
			t.Errorf("header %d = %#v, want %#v", f, got, v)
		}
	}
	if get.Type != dbus.TypeMethodCall || get.Serial() != 42 || !reflect.DeepEqual(get.Body, []any{"org.freedesktop.systemd1.Service", "MainPID"}) {
		t.Errorf("Get decodes as %v", get)
	}
	if r.Len() != 0 {
		t.Errorf("%d bytes left over", r.Len())
	}
}

// An answer godbus encodes, in either byte order, reads as the value godbus
// would give, of the same Go type.
func TestBulkAnswerParses(t *testing.T) {
	values := []any{"success", dbus.ObjectPath("/a/b"), uint32(4242), int32(-3), uint64(1 << 62), int64(-5), true, false, []byte{1, 2, 3}, []byte{}}
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		for i, v := range values {
			msg := &dbus.Message{Type: dbus.TypeMethodReply, Headers: map[dbus.HeaderField]dbus.Variant{
				dbus.FieldReplySerial: dbus.MakeVariant(uint32(100 + i)),
				dbus.FieldSender:      dbus.MakeVariant(":1.2"),
				dbus.FieldDestination: dbus.MakeVariant(":1.77"),
				dbus.FieldSignature:   dbus.MakeVariant(dbus.SignatureOf(dbus.MakeVariant(v))),
			}, Body: []any{dbus.MakeVariant(v)}}
			var buf bytes.Buffer
			if err := msg.EncodeTo(&buf, order); err != nil {
				t.Fatal(err)
			}
			typ, replyTo, got0, body, err := readMessage(&buf)
			if err != nil || typ != msgReturn || replyTo != uint32(100+i) || got0 != order {
				t.Fatalf("%v %T: type %d, reply to %d, order %v, %v", order, v, typ, replyTo, got0, err)
			}
			got, err := parseVariant(body, got0)
			if err != nil || !reflect.DeepEqual(got, v) {
				t.Errorf("%v: %#v reads as %#v (%v)", order, v, got, err)
			}
		}
	}
}

// A message cut anywhere, or one that says it is huge, is an error, never a
// panic or a read beyond it.
func TestBulkAnswerCutShort(t *testing.T) {
	msg := &dbus.Message{Type: dbus.TypeMethodReply, Headers: map[dbus.HeaderField]dbus.Variant{
		dbus.FieldReplySerial: dbus.MakeVariant(uint32(7)),
		dbus.FieldSignature:   dbus.MakeVariant(dbus.ParseSignatureMust("v")),
	}, Body: []any{dbus.MakeVariant([]byte("0123456789abcdef"))}}
	var buf bytes.Buffer
	if err := msg.EncodeTo(&buf, binary.LittleEndian); err != nil {
		t.Fatal(err)
	}
	whole := buf.Bytes()
	for n := 0; n < len(whole); n++ {
		if _, _, _, _, err := readMessage(bytes.NewReader(whole[:n])); err == nil {
			t.Errorf("cut at %d of %d: no error", n, len(whole))
		}
	}
	_, _, order, body, err := readMessage(bytes.NewReader(whole))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(body); n++ {
		if v, err := parseVariant(body[:n], order); err == nil {
			t.Errorf("body cut at %d: %#v, no error", n, v)
		}
	}
	huge := append([]byte{}, whole...)
	binary.LittleEndian.PutUint32(huge[4:], maxBulkMessage+1)
	if _, _, _, _, err := readMessage(bytes.NewReader(huge)); err == nil {
		t.Error("a body of more than maxBulkMessage: no error")
	}
}

func TestUnixPath(t *testing.T) {
	for addr, want := range map[string]string{
		"unix:path=/run/user/1000/bus":              "/run/user/1000/bus",
		"unix:path=/run/user/1000/bus,guid=0123abc": "/run/user/1000/bus",
		"unix:abstract=/tmp/dbus-x":                 "",
		"unix:path=/a%20b":                          "", // escaped: left to godbus
		"tcp:host=localhost,port=1":                 "",
		"unix:path=/a;unix:path=/b":                 "",
	} {
		got, ok := unixPath(addr)
		if got != want || ok != (want != "") {
			t.Errorf("unixPath(%q) = %q, %v", addr, got, ok)
		}
	}
}
