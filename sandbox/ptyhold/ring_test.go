package ptyhold

import (
	"bytes"
	"strings"
	"testing"
)

// TestRing: the ring keeps the last bytes, never more than its size, and
// once it wrapped starts after a line end (never mid-sequence).
func TestRing(t *testing.T) {
	r := newRing(16)
	r.write([]byte("hello"))
	if got := string(r.bytes()); got != "hello" {
		t.Errorf("before wrapping: %q", got)
	}
	r.write([]byte(" world\nsecond line\n"))
	if got := string(r.bytes()); got != "second line\n" {
		t.Errorf("after wrapping: %q", got)
	}
	r.write([]byte(strings.Repeat("x", 100)))
	if got := r.bytes(); len(got) != 16 || !bytes.Equal(got, bytes.Repeat([]byte("x"), 16)) {
		t.Errorf("a write larger than the ring: %q", got)
	}
	for i := 0; i < 1000; i++ {
		r.write([]byte("ab\n"))
		if n := len(r.bytes()); n > 16 {
			t.Fatalf("the ring holds %d bytes", n)
		}
	}
}
