package clone

import (
	"crypto/sha1"
	"encoding/binary"
	"os"
	"path/filepath"
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

// An index git wrote without its checksum (index.skipHash, which git
// 2.40's feature.manyFiles turns on: a trailer of zeros) is read as git
// reads it, not left to git's checkout: the large repositories the copy
// is fastest for are the ones that set it.
func TestParseIndexSkipHash(t *testing.T) {
	ws := copyRepo(t, true)
	b, err := os.ReadFile(filepath.Join(ws, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := parseIndex(b, 20)
	if err != nil {
		t.Fatal(err)
	}
	copy(b[len(b)-20:], make([]byte, 20))
	got, err := parseIndex(b, 20)
	if err != nil || len(got) != len(want) {
		t.Errorf("parseIndex: %d entries, %v; want %d", len(got), err, len(want))
	}
	b[len(b)-1] = 1 // neither zeros nor the checksum
	if _, err := parseIndex(b, 20); err != errIndexUnusual {
		t.Errorf("parseIndex of a wrong checksum: %v, want errIndexUnusual", err)
	}
}
