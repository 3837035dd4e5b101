package egress

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The bounds of a push the proxy reads to prove its updates fast-forwards:
// the request's body, and what its pack inflates to. A push over them is
// refused unless force is lent (then its body is not read).
const (
	MaxPushBody     = 32 << 20
	maxPackInflated = 64 << 20
	maxDeltaDepth   = 64
)

// zeroID is git's "no object": an old ID of zeros creates a ref, a new
// one deletes it.
const zeroID = "0000000000000000000000000000000000000000"

// refUpdate is one command of a git-receive-pack request: old and new
// object IDs (hex) and the ref.
type refUpdate struct {
	Old, New, Ref string
}

// kind is what the update does: "create", "delete" or "update". A new
// ID of zeros is a deletion whatever the old one: git receive-pack deletes
// the ref for zeros to zeros too (an old ID that is no object is taken
// for a corrupt ref, deleted whatever it holds).
func (u refUpdate) kind() string {
	switch {
	case u.New == zeroID:
		return "delete"
	case u.Old == zeroID:
		return "create"
	}
	return "update"
}

// readPushCommands reads the commands at the start of a receive-pack
// request (pkt-lines up to a flush, then the push options if asked for),
// leaving r at the pack. Anything it does not know (a push certificate,
// another object format) is an error: refused, never guessed.
func readPushCommands(r *bufio.Reader) ([]refUpdate, error) {
	var cmds []refUpdate
	options := false
	for first := true; ; first = false {
		line, flush, err := readPkt(r)
		if err != nil {
			return nil, err
		}
		if flush {
			break
		}
		line = strings.TrimSuffix(line, "\n")
		if first {
			var caps string
			line, caps, _ = strings.Cut(line, "\x00")
			for _, c := range strings.Fields(caps) {
				switch {
				case c == "push-options":
					options = true
				case strings.HasPrefix(c, "object-format=") && c != "object-format=sha1":
					return nil, fmt.Errorf("object format %s is not read by the proxy", strings.TrimPrefix(c, "object-format="))
				}
			}
		}
		if strings.HasPrefix(line, "shallow ") {
			continue
		}
		f := strings.Split(line, " ")
		if len(f) != 3 || !isHexID(f[0]) || !isHexID(f[1]) || !strings.HasPrefix(f[2], "refs/") {
			return nil, fmt.Errorf("not a ref update: %q", printable(line))
		}
		cmds = append(cmds, refUpdate{Old: f[0], New: f[1], Ref: f[2]})
	}
	for options {
		_, flush, err := readPkt(r)
		if err != nil {
			return nil, err
		}
		options = !flush
	}
	return cmds, nil
}

// readPkt reads one pkt-line: its payload, or flush for "0000".
func readPkt(r *bufio.Reader) (string, bool, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return "", false, fmt.Errorf("a pkt-line cut short: %w", err)
	}
	n, err := strconv.ParseUint(string(head[:]), 16, 16)
	if err != nil {
		return "", false, fmt.Errorf("not a pkt-line length: %q", printable(string(head[:])))
	}
	if n == 0 {
		return "", true, nil
	}
	if n < 4 {
		return "", false, fmt.Errorf("a pkt-line of length %d", n)
	}
	b := make([]byte, n-4)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", false, fmt.Errorf("a pkt-line cut short: %w", err)
	}
	return string(b), false, nil
}

func isHexID(s string) bool {
	if len(s) != 40 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// Pack object types (gitformat-pack).
const (
	objCommit   = 1
	objTree     = 2
	objBlob     = 3
	objTag      = 4
	objOfsDelta = 6
	objRefDelta = 7
)

var objNames = map[int]string{objCommit: "commit", objTree: "tree", objBlob: "blob", objTag: "tag"}

// packEntry is one object of a pack as stored: its type, where its
// compressed data starts, and its delta base (an offset or an ID).
type packEntry struct {
	typ     int
	off     int
	data    int
	baseOff int
	baseID  string
}

// packCommits reads a pack (its objects inflated with compress/zlib,
// deltas whose base is in the pack resolved) and returns the parents of
// each commit it could resolve, by ID. An object whose base is outside
// the pack (a thin pack's) is left out: what rests on it is unproven.
func packCommits(pack []byte) (map[string][]string, error) {
	entries, err := packEntries(pack)
	if err != nil {
		return nil, err
	}
	p := &packReader{pack: pack, entries: entries, byOff: map[int]int{}, byID: map[string]int{},
		typ: make([]int, len(entries)), content: make([][]byte, len(entries)), budget: maxPackInflated}
	for i, e := range entries {
		p.byOff[e.off] = i
	}
	commits := map[string][]string{}
	// Rounds: a ref delta's base may be an object later in the pack, known
	// by its ID only once resolved.
	for progress := true; progress; {
		progress = false
		for i := range entries {
			if p.typ[i] != 0 {
				continue
			}
			typ, body, err := p.resolve(i, 0)
			if errors.Is(err, errOutside) {
				continue
			}
			if err != nil {
				return nil, err
			}
			progress = true
			p.typ[i], p.content[i] = typ, body
			id := objectID(typ, body)
			p.byID[id] = i
			if typ == objCommit {
				commits[id] = commitParents(body)
			}
		}
	}
	return commits, nil
}

// errOutside is a delta whose base is not in the pack.
var errOutside = errors.New("a delta base outside the pack")

type packReader struct {
	pack    []byte
	entries []packEntry
	byOff   map[int]int
	byID    map[string]int
	typ     []int
	content [][]byte
	budget  int
}

// resolve is object i's type and content, applying its deltas.
func (p *packReader) resolve(i, depth int) (int, []byte, error) {
	if p.typ[i] != 0 {
		return p.typ[i], p.content[i], nil
	}
	if depth > maxDeltaDepth {
		return 0, nil, errors.New("a delta chain too long")
	}
	e := p.entries[i]
	// A delta's base first: one outside the pack is known before anything
	// is inflated (a thin pack's delta was inflated again each round, its
	// size taken from the budget each time, until a big push was refused).
	base, typ := -1, e.typ
	switch e.typ {
	case objOfsDelta:
		j, ok := p.byOff[e.baseOff]
		if !ok {
			return 0, nil, errors.New("an offset delta whose base is not an object")
		}
		base = j
	case objRefDelta:
		j, ok := p.byID[e.baseID]
		if !ok {
			return 0, nil, errOutside
		}
		base = j
	}
	var src []byte
	if base >= 0 {
		var err error
		if typ, src, err = p.resolve(base, depth+1); err != nil {
			return 0, nil, err
		}
	}
	data, err := p.inflate(e.data)
	if err != nil {
		return 0, nil, err
	}
	if base < 0 {
		return typ, data, nil
	}
	out, err := applyDelta(src, data, p.budget)
	if err != nil {
		return 0, nil, err
	}
	p.budget -= len(out)
	return typ, out, nil
}

// inflate is the zlib stream at off, within the pack's budget.
func (p *packReader) inflate(off int) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(p.pack[off:]))
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(zr, int64(p.budget)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > p.budget {
		return nil, fmt.Errorf("the pack inflates to over %d bytes", maxPackInflated)
	}
	p.budget -= len(b)
	return b, nil
}

// packEntries lists a pack's objects: each header read, each compressed
// stream inflated once to find where it ends, all of them to at most
// maxPackInflated (a pack of zlib bombs, each just under the bound, was
// otherwise inflated whole: 64 MiB an object, 500 of them in a 32 MiB
// push, seconds of the proxy's CPU each).
func packEntries(pack []byte) ([]packEntry, error) {
	if len(pack) < 12+20 || string(pack[:4]) != "PACK" {
		return nil, errors.New("not a pack")
	}
	if v := binary.BigEndian.Uint32(pack[4:]); v != 2 && v != 3 {
		return nil, fmt.Errorf("pack version %d", v)
	}
	n := int(binary.BigEndian.Uint32(pack[8:]))
	if n > len(pack) {
		return nil, errors.New("a pack with more objects than bytes")
	}
	entries := make([]packEntry, 0, n)
	off := 12
	left := int64(maxPackInflated)
	for range n {
		e := packEntry{off: off}
		if off >= len(pack) {
			return nil, errors.New("a pack cut short")
		}
		c := pack[off]
		e.typ = int(c>>4) & 7
		off++
		for c&0x80 != 0 {
			if off >= len(pack) {
				return nil, errors.New("a pack cut short")
			}
			c = pack[off]
			off++
		}
		switch e.typ {
		case objOfsDelta:
			if off >= len(pack) {
				return nil, errors.New("a pack cut short")
			}
			c = pack[off]
			off++
			back := int(c & 0x7f)
			for c&0x80 != 0 {
				if off >= len(pack) || back > len(pack) {
					return nil, errors.New("a pack cut short")
				}
				c = pack[off]
				off++
				back = (back+1)<<7 | int(c&0x7f)
			}
			e.baseOff = e.off - back
		case objRefDelta:
			if off+20 > len(pack) {
				return nil, errors.New("a pack cut short")
			}
			e.baseID = hex.EncodeToString(pack[off : off+20])
			off += 20
		case objCommit, objTree, objBlob, objTag:
		default:
			return nil, fmt.Errorf("an object of type %d", e.typ)
		}
		e.data = off
		br := bytes.NewReader(pack[off:])
		zr, err := zlib.NewReader(br)
		if err != nil {
			return nil, err
		}
		inflated, err := io.Copy(io.Discard, io.LimitReader(zr, left+1))
		if err != nil {
			return nil, err
		}
		if inflated > left {
			return nil, fmt.Errorf("the pack inflates to over %d bytes", maxPackInflated)
		}
		left -= inflated
		// bytes.Reader is an io.ByteReader: flate reads no further than
		// its stream (and zlib its checksum), so what is left is the rest.
		off = len(pack) - br.Len()
		entries = append(entries, e)
	}
	return entries, nil
}

// applyDelta applies a git delta to src, its result at most budget bytes.
func applyDelta(src, delta []byte, budget int) ([]byte, error) {
	bad := errors.New("a delta that does not apply")
	varint := func() int {
		n, shift := 0, 0
		for len(delta) > 0 && shift < 63 {
			c := delta[0]
			delta = delta[1:]
			n |= int(c&0x7f) << shift
			shift += 7
			if c&0x80 == 0 {
				return n
			}
		}
		return -1
	}
	if varint() != len(src) {
		return nil, bad
	}
	size := varint()
	if size < 0 || size > budget {
		return nil, bad
	}
	out := make([]byte, 0, size)
	for len(delta) > 0 {
		cmd := delta[0]
		delta = delta[1:]
		if cmd&0x80 == 0 {
			if cmd == 0 || int(cmd) > len(delta) {
				return nil, bad
			}
			out = append(out, delta[:cmd]...)
			delta = delta[cmd:]
			continue
		}
		var off, n int
		for i := range 7 {
			if cmd&(1<<i) == 0 {
				continue
			}
			if len(delta) == 0 {
				return nil, bad
			}
			if i < 4 {
				off |= int(delta[0]) << (8 * i)
			} else {
				n |= int(delta[0]) << (8 * (i - 4))
			}
			delta = delta[1:]
		}
		if n == 0 {
			n = 0x10000
		}
		if off+n > len(src) || len(out)+n > size {
			return nil, bad
		}
		out = append(out, src[off:off+n]...)
	}
	if len(out) != size {
		return nil, bad
	}
	return out, nil
}

// objectID is git's SHA-1 ID of an object.
func objectID(typ int, body []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", objNames[typ], len(body))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// commitParents reads a commit's parents as git does (parse_commit_buffer):
// the parent lines right after the tree line, the first line; a parent
// line anywhere else is no parent to git (a header of its own, which
// receive-pack keeps), so none to the proof either. A commit git could not
// parse, or a parent line it would refuse, has none.
func commitParents(body []byte) []string {
	rest, ok := strings.CutPrefix(string(body), "tree ")
	if !ok || len(rest) < 41 || !isHexID(rest[:40]) || rest[40] != '\n' {
		return nil
	}
	rest = rest[41:]
	var parents []string
	for strings.HasPrefix(rest, "parent ") {
		line, more, ended := strings.Cut(rest, "\n")
		p := strings.TrimPrefix(line, "parent ")
		if !ended || !isHexID(p) {
			return nil
		}
		parents = append(parents, p)
		rest = more
	}
	return parents
}

// fastForward reports whether the pack proves old an ancestor of new:
// a walk from new through the pack's commits reaches old.
func fastForward(commits map[string][]string, old, new string) bool {
	seen := map[string]bool{}
	todo := []string{new}
	for len(todo) > 0 {
		id := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if id == old {
			return true
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		todo = append(todo, commits[id]...)
	}
	return false
}
