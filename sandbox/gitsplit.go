package sandbox

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"

	"mosaic/units/regfile"
)

// A split index. git reads an index with a "link" extension as two files
// whatever its config says: the index holds the entries changed since,
// and .git/sharedindex.HASH the rest, both written by the session. A
// gitlink planted only in the shared part, or as an entry of the index
// that replaces one of the shared part (it has no path of its own: it
// takes that entry's), was not seen, and the host's git status ran the
// submodule. So the shared part's gitlinks are read too, and the paths of
// the entries the replacing gitlinks stand for. Entries the index deletes
// from the shared part are still counted: checked for nothing.

// sharedLinks lists the gitlinks the shared part of a split index adds,
// given the index's extensions (ext, its checksum last) and the positions
// of its gitlinks with no path; at most max. None when the index is not
// split.
func sharedLinks(ws string, ext []byte, hash int, replacing []int, max int) ([]string, error) {
	link, err := linkExtension(ext, hash)
	if err != nil || link == nil {
		return nil, err
	}
	shared := filepath.Join(ws, ".git", "sharedindex."+hex.EncodeToString(link[:hash]))
	// Which entries of the shared part the pathless gitlinks replace:
	// the n-th of them, the n-th bit set in the replace bitmap.
	at := map[int]bool{}
	if len(replacing) > 0 {
		rest := link[hash:]
		n, err := ewahSize(rest) // the delete bitmap
		if err != nil {
			return nil, err
		}
		bits, err := ewahBits(rest[n:], replacing[len(replacing)-1]+1)
		if err != nil {
			return nil, err
		}
		for _, r := range replacing {
			if r >= len(bits) {
				return nil, badIndex("a replacement without its entry")
			}
			at[bits[r]] = true
		}
	}
	b, err := regfile.Read(shared, true, maxIndex)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // git cannot read the index either
	}
	if err != nil {
		return nil, err
	}
	var links []string
	_, err = walkIndex(b, hash, func(i int, path []byte, isLink bool) error {
		if !(isLink || at[i]) || len(path) == 0 || len(path) > maxLinkPath {
			return nil
		}
		if len(links) >= max {
			return errTooManyGitlinks
		}
		links = append(links, string(path))
		return nil
	})
	if err != nil && !errors.Is(err, errTooManyGitlinks) {
		return nil, err
	}
	return links, err
}

// linkExtension finds the "link" extension among ext (the index's
// extensions, then its checksum): its data, nil when there is none.
func linkExtension(ext []byte, hash int) ([]byte, error) {
	if len(ext) < hash {
		return nil, badIndex("cut short")
	}
	ext = ext[:len(ext)-hash]
	for len(ext) > 0 {
		if len(ext) < 8 {
			return nil, badIndex("an extension")
		}
		size := binary.BigEndian.Uint32(ext[4:8])
		if uint64(size) > uint64(len(ext)-8) {
			return nil, badIndex("an extension's size")
		}
		if string(ext[:4]) == "link" {
			data := ext[8 : 8+size]
			if len(data) < hash {
				return nil, badIndex("the link extension")
			}
			return data, nil
		}
		ext = ext[8+size:]
	}
	return nil, nil
}

// ewahSize is the length of the EWAH bitmap (git's ewah/ewah_io.c) that b
// begins with: its size in bits, its count of 64-bit words, the words, and
// the position of its last run-length word.
func ewahSize(b []byte) (int, error) {
	if len(b) < 8 {
		return 0, badIndex("a bitmap")
	}
	words := uint64(binary.BigEndian.Uint32(b[4:8]))
	n := 8 + 8*words + 4
	if n > uint64(len(b)) {
		return 0, badIndex("a bitmap's size")
	}
	return int(n), nil
}

// ewahBits lists the first want bits set in the EWAH bitmap b. Each
// run-length word says how many words of its running bit follow (up to
// 2^32) and then how many literal words; a run is read only as far as
// the bits wanted, so a huge one costs nothing.
func ewahBits(b []byte, want int) ([]int, error) {
	if _, err := ewahSize(b); err != nil {
		return nil, err
	}
	words := int(binary.BigEndian.Uint32(b[4:8]))
	word := func(i int) uint64 { return binary.BigEndian.Uint64(b[8+8*i:]) }
	var bits []int
	pos := uint64(0)
	for i := 0; i < words && len(bits) < want; {
		rlw := word(i)
		i++
		run := (rlw >> 1) & 0xffffffff
		literals := int(rlw >> 33)
		if rlw&1 != 0 {
			for k := uint64(0); k < run*64 && len(bits) < want; k++ {
				bits = append(bits, int(pos+k))
			}
		}
		pos += run * 64
		for l := 0; l < literals && len(bits) < want; l++ {
			if i >= words {
				return nil, badIndex("a bitmap's words")
			}
			w := word(i)
			i++
			for k := 0; k < 64; k++ {
				if w&(1<<k) != 0 && len(bits) < want {
					bits = append(bits, int(pos)+k)
				}
			}
			pos += 64
		}
	}
	return bits, nil
}
