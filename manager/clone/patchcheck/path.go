package patchcheck

import (
	"strings"
	"unicode/utf8"
)

// VerifyPath refuses a path mosaic must not write into a checkout: empty,
// absolute, with an empty, "." or ".." component, or with a component git
// itself would take for .git (or .gitmodules) on any filesystem it guards:
// any case; NTFS's trailing dots and spaces, alternate data streams
// (".git::$INDEX_ALLOCATION") and short name (GIT~1); HFS+'s ignored code
// points (".g\u200cit"). A backslash separates components too, as on NTFS.
// This follows git's verify_path, is_ntfs_dotgit and is_hfs_dotgit, and is
// stricter where they depend on core.protectNTFS/protectHFS.
func VerifyPath(p string) error {
	switch {
	case p == "":
		return refuse(p, "an empty path")
	case len(p) > MaxPathBytes:
		return refuse(p[:64]+"...", "a path over %d bytes", MaxPathBytes)
	case strings.HasPrefix(p, "/"):
		return refuse(p, "an absolute path")
	}
	if strings.HasSuffix(p, "/") || strings.Contains(p, "//") || strings.Contains(p, `\\`) {
		return refuse(p, "a path with an empty component")
	}
	for _, c := range strings.FieldsFunc(p, isSep) {
		switch c {
		case "", ".", "..":
			return refuse(p, "a path with an empty, \".\" or \"..\" component")
		}
		switch dotName(c) {
		case ".git":
			return refuse(p, "a path into .git (as %q): mosaic never writes a repository's own files", c)
		case ".gitmodules":
			return refuse(p, "a change to .gitmodules (as %q): submodules are never written into your checkout", c)
		}
	}
	return nil
}

func isSep(r rune) bool { return r == '/' || r == '\\' }

// dotName is a component as git's guards compare it: HFS+'s ignored code
// points dropped, ASCII lowercased, NTFS's trailing dots and spaces and an
// alternate data stream (":...") dropped, the short names of .git and
// .gitmodules (git~1, gitmod~1) read as the names.
func dotName(c string) string {
	var b strings.Builder
	for i := 0; i < len(c); {
		r, n := utf8.DecodeRuneInString(c[i:])
		i += n
		if hfsIgnored(r) {
			continue
		}
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	s := b.String()
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimRight(s, ". ")
	switch {
	case s == "git~1":
		return ".git"
	case strings.HasPrefix(s, "gitmod~") && len(s) == len("gitmod~1"):
		return ".gitmodules"
	}
	return s
}

// hfsIgnored are the code points HFS+ ignores in names (git's
// next_hfs_char): zero-width joiners and marks, directional controls, the
// deprecated format characters, the byte order mark.
func hfsIgnored(r rune) bool {
	switch {
	case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
		return true
	}
	return false
}
