package clone

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
	"os"
)

// The copy's working tree is made from the user's own files, not from
// git's objects (copyWorkTree), and its index is then written by mosaic:
// the snapshot's entries (what the base commit holds), each with the stat
// of the file just written, so that git in the session sees a clean tree
// without hashing it again. This file reads and writes git's index format
// (Documentation/gitformat-index.txt) as far as that needs: versions 2, 3
// and 4, stage 0, no extended flags, no split or sparse index; anything
// else is errIndexUnusual, and the copy is then checked out by git.

// errIndexUnusual is an index this file does not take apart: git checks
// the copy out instead.
var errIndexUnusual = errors.New("an index mosaic does not copy by itself")

// indexEntry is one path of an index: its stat data as git recorded it
// (ctime, mtime, dev, ino, uid, gid, size, each the low 32 bits), its
// mode (git's: 100644, 100755, 120000 or 160000) and its object id.
type indexEntry struct {
	CtimeSec, CtimeNsec, MtimeSec, MtimeNsec uint32
	Dev, Ino, Mode, UID, GID, Size           uint32
	OID                                      []byte
	Path                                     string
}

// Modes of index entries.
const (
	modeFile    = 0o100644
	modeExec    = 0o100755
	modeSymlink = 0o120000
	modeGitlink = 0o160000
)

// readIndex reads the index file at path; oidLen is the repository's
// object id's length in bytes (20 for SHA-1, 32 for SHA-256).
func readIndex(path string, oidLen int) ([]indexEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseIndex(b, oidLen)
}

// parseIndex takes an index's bytes apart; its trailing checksum is
// checked, unless it is all zeros: git's index.skipHash (git 2.40's
// feature.manyFiles turns it on), which git reads as no checksum.
func parseIndex(b []byte, oidLen int) ([]indexEntry, error) {
	if len(b) < 12+oidLen || string(b[:4]) != "DIRC" {
		return nil, errIndexUnusual
	}
	body, sum := b[:len(b)-oidLen], b[len(b)-oidLen:]
	if !bytes.Equal(sum, make([]byte, oidLen)) && !bytes.Equal(indexSum(body, oidLen), sum) {
		return nil, errIndexUnusual
	}
	version := binary.BigEndian.Uint32(b[4:])
	if version < 2 || version > 4 {
		return nil, errIndexUnusual
	}
	n := int(binary.BigEndian.Uint32(b[8:]))
	// An entry takes at least its fixed part, a path's byte and its NUL:
	// a count the bytes cannot hold would be made a slice of first (2^31
	// entries: a fatal out of memory, no panic to recover).
	if n > (len(body)-12)/(40+oidLen+2+2) {
		return nil, errIndexUnusual
	}
	entries := make([]indexEntry, 0, n)
	p, prev := 12, ""
	for i := 0; i < n; i++ {
		e, next, err := parseEntry(body, p, oidLen, version, prev)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
		p, prev = next, e.Path
	}
	// Extensions: a split index (link) or a sparse one (sdir) names
	// entries this index does not hold; any other is a cache git makes
	// again, and one git does not know (lower case) refuses git itself.
	for p+8 <= len(body) {
		sig := string(body[p : p+4])
		if sig == "link" || sig == "sdir" || sig[0] < 'A' || sig[0] > 'Z' {
			return nil, errIndexUnusual
		}
		p += 8 + int(binary.BigEndian.Uint32(body[p+4:]))
	}
	return entries, nil
}

// parseEntry reads the entry at p of an index of version; prev is the
// previous entry's path (version 4 names a path by what it keeps of it).
func parseEntry(b []byte, p, oidLen int, version uint32, prev string) (indexEntry, int, error) {
	fixed := 40 + oidLen + 2
	if p+fixed > len(b) {
		return indexEntry{}, 0, errIndexUnusual
	}
	u := func(k int) uint32 { return binary.BigEndian.Uint32(b[p+4*k:]) }
	e := indexEntry{CtimeSec: u(0), CtimeNsec: u(1), MtimeSec: u(2), MtimeNsec: u(3),
		Dev: u(4), Ino: u(5), Mode: u(6), UID: u(7), GID: u(8), Size: u(9)}
	e.OID = b[p+40 : p+40+oidLen]
	flags := binary.BigEndian.Uint16(b[p+40+oidLen:])
	if flags&0x4000 != 0 || flags&0x3000 != 0 { // extended flags (skip-worktree, intent-to-add), or a stage
		return indexEntry{}, 0, errIndexUnusual
	}
	start := p + fixed
	if version == 4 {
		strip, k := indexVarint(b[start:])
		if k == 0 || strip > len(prev) {
			return indexEntry{}, 0, errIndexUnusual
		}
		end := bytes.IndexByte(b[start+k:], 0)
		if end < 0 {
			return indexEntry{}, 0, errIndexUnusual
		}
		e.Path = prev[:len(prev)-strip] + string(b[start+k:start+k+end])
		return e, start + k + end + 1, nil
	}
	end := bytes.IndexByte(b[start:], 0)
	if end < 0 {
		return indexEntry{}, 0, errIndexUnusual
	}
	e.Path = string(b[start : start+end])
	// Versions 2 and 3 pad each entry with 1 to 8 NULs to a multiple of 8.
	return e, p + (fixed+end+8)&^7, nil
}

// indexVarint reads git's offset encoding (version 4's strip count): the
// value and the bytes it took (0 for none).
func indexVarint(b []byte) (int, int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	v, k := int(c&127), 1
	for c&128 != 0 {
		if k >= len(b) || v > 1<<40 {
			return 0, 0
		}
		c = b[k]
		k++
		v = (v+1)<<7 + int(c&127)
	}
	return v, k
}

// encodeIndex writes entries as an index of version 2, without
// extensions (git makes its caches again).
func encodeIndex(entries []indexEntry, oidLen int) []byte {
	var b bytes.Buffer
	b.WriteString("DIRC")
	b.Write(binary.BigEndian.AppendUint32(nil, 2))
	b.Write(binary.BigEndian.AppendUint32(nil, uint32(len(entries))))
	for _, e := range entries {
		var fixed []byte
		for _, v := range []uint32{e.CtimeSec, e.CtimeNsec, e.MtimeSec, e.MtimeNsec, e.Dev, e.Ino, e.Mode, e.UID, e.GID, e.Size} {
			fixed = binary.BigEndian.AppendUint32(fixed, v)
		}
		fixed = append(fixed, e.OID...)
		fixed = binary.BigEndian.AppendUint16(fixed, uint16(min(len(e.Path), 0xfff)))
		b.Write(fixed)
		b.WriteString(e.Path)
		b.Write(make([]byte, 8-(len(fixed)+len(e.Path))%8))
	}
	b.Write(indexSum(b.Bytes(), oidLen))
	return b.Bytes()
}

// indexSum is an index's trailing checksum: its object format's hash.
func indexSum(b []byte, oidLen int) []byte {
	h := objectHash(oidLen)
	h.Write(b)
	return h.Sum(nil)
}

// objectHash is the hash of the object format whose ids are oidLen bytes
// long: SHA-256's for 32, else SHA-1's.
func objectHash(oidLen int) hash.Hash {
	if oidLen == sha256.Size {
		return sha256.New()
	}
	return sha1.New()
}
