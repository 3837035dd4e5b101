package patchcheck

import (
	"bufio"
	"bytes"

	"strings"
)

// Bundle is a git bundle's header: what it needs (prerequisites) and the
// refs it holds.
type Bundle struct {
	Version int
	Prereqs []string
	Refs    map[string]string // ref name -> object id
}

// maxBundleHeader bounds the header's bytes.
const maxBundleHeader = 64 << 10

// ParseBundleHeader reads the header of a git bundle (v2 or v3, SHA-1):
// the signature, capabilities (v3), prerequisites ("-<id> comment"), refs
// ("<id> <name>"), and the blank line before the pack. Anything else is a
// refusal.
func ParseBundleHeader(b []byte) (Bundle, error) {
	bad := func(format string, a ...any) (Bundle, error) {
		return Bundle{}, refuse("", "the bundle's header: "+format, a...)
	}
	if len(b) > maxBundleHeader {
		b = b[:maxBundleHeader]
	}
	r := bufio.NewReader(bytes.NewReader(b))
	read := func() (string, bool) {
		l, err := r.ReadString('\n')
		if err != nil {
			return "", false
		}
		return strings.TrimSuffix(l, "\n"), true
	}
	sig, ok := read()
	out := Bundle{Refs: map[string]string{}}
	switch {
	case !ok:
		return bad("no signature line")
	case sig == "# v2 git bundle":
		out.Version = 2
	case sig == "# v3 git bundle":
		out.Version = 3
	default:
		return bad("%q is not a git bundle's signature", sig)
	}
	for {
		l, ok := read()
		if !ok {
			return bad("no blank line before the pack (or a header over %d bytes)", maxBundleHeader)
		}
		switch {
		case l == "":
			if len(out.Refs) == 0 {
				return bad("no ref")
			}
			return out, nil
		case strings.HasPrefix(l, "@"):
			if out.Version != 3 || l != "@object-format=sha1" {
				return bad("capability %q is not one mosaic reads", l)
			}
		case strings.HasPrefix(l, "-"):
			id, _, _ := strings.Cut(l[1:], " ")
			if !IsObjectID(id) {
				return bad("prerequisite %q is not an object id", id)
			}
			out.Prereqs = append(out.Prereqs, id)
		default:
			id, name, ok := strings.Cut(l, " ")
			if !ok || !IsObjectID(id) || !strings.HasPrefix(name, "refs/") {
				return bad("%q is not a ref line", l)
			}
			if _, dup := out.Refs[name]; dup {
				return bad("ref %s twice", name)
			}
			out.Refs[name] = id
		}
	}
}

// IsObjectID reports whether s is a full SHA-1 object id in lowercase hex.
func IsObjectID(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// SnapshotRef is the one ref a finish step's bundle holds.
const SnapshotRef = "refs/mosaic/snapshot"

// CheckBundle refuses a bundle header that is not a finish step's: exactly
// SnapshotRef, at head.
func CheckBundle(b Bundle, head string) error {
	id, ok := b.Refs[SnapshotRef]
	if len(b.Refs) != 1 || !ok {
		var names []string
		for n := range b.Refs {
			names = append(names, n)
		}
		return refuse("", "the bundle holds %s, not exactly %s", strings.Join(names, ", "), SnapshotRef)
	}
	if id != head {
		return refuse("", "the bundle's %s is %s, not the snapshot's %s", SnapshotRef, id, head)
	}
	return nil
}
