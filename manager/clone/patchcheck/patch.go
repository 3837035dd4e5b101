// Package patchcheck reads what a clone-mode session's finish step wrote (a
// binary patch made by `git diff --binary`, a git bundle's header) as
// untrusted data, and says whether mosaic may write it into the user's
// checkout: no path with a .git component in any spelling git itself treats
// as .git (case, NTFS short names and trailing dots or spaces, HFS+ ignored
// code points), no gitlink or .gitmodules, no symlink that leads out of the
// repository and no write through a symlink, nothing over the size bounds.
// It is pure: it runs nothing and reads only the bytes it is given.
package patchcheck

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// The bounds on a change mosaic reads (docs/workspace.md: "Clone mode").
const (
	MaxPatchBytes  = 64 << 20  // the whole patch
	MaxBundleBytes = 256 << 20 // the whole bundle
	MaxFiles       = 20000     // files one change may touch
	MaxPathBytes   = 4096      // one path
)

// File is one file a patch changes.
type File struct {
	Path    string `json:"path"`               // the path after the change ("" when deleted: see OldPath)
	OldPath string `json:"old_path,omitempty"` // the path before, when it differs (rename, copy, deletion)
	Status  string `json:"status"`             // added, deleted, modified, renamed, copied
	OldMode string `json:"old_mode,omitempty"`
	NewMode string `json:"new_mode,omitempty"`
	Added   int    `json:"added"`
	Deleted int    `json:"deleted"`
	Binary  bool   `json:"binary,omitempty"`
	// Target is a symlink's target, when the change makes one.
	Target string `json:"symlink_target,omitempty"`
	// HostRun says why your tools may run this file ("" when they do not).
	HostRun string `json:"host_run,omitempty"`

	// indexMode is the mode an "index" line gives (git apply takes it as
	// the old mode); body is set once the file's hunks (or binary data)
	// began, after which git reads no more of its header lines.
	indexMode string
	body      bool
}

// Summary is what a patch changes.
type Summary struct {
	Files   []File `json:"files"`
	Added   int    `json:"insertions"`
	Deleted int    `json:"deletions"`
	// ModeChanges counts files whose mode changed (executable bit, a
	// symlink made or removed).
	ModeChanges int `json:"mode_changes"`
}

// Line is the summary in one line: "5 files, +120 -30".
func (s Summary) Line() string {
	n := "files"
	if len(s.Files) == 1 {
		n = "file"
	}
	return fmt.Sprintf("%d %s, +%d -%d", len(s.Files), n, s.Added, s.Deleted)
}

// Refusal is why a change may not be written; Path names the file.
type Refusal struct {
	Path, Why string
}

func (r *Refusal) Error() string {
	if r.Path == "" {
		return r.Why
	}
	return fmt.Sprintf("%s: %s", strconv.Quote(r.Path), r.Why)
}

func refuse(p, format string, a ...any) error {
	return &Refusal{Path: p, Why: fmt.Sprintf(format, a...)}
}

// Parse reads a patch of `git diff --binary` (git's own format: "diff
// --git" headers, extended header lines, hunks, "GIT binary patch"
// literals) and checks it (Check). Anything it does not understand is a
// refusal: a patch is applied only if every line of it was read.
func Parse(patch []byte) (Summary, error) {
	var s Summary
	if len(patch) > MaxPatchBytes {
		return s, refuse("", "the patch is %d bytes, over the bound of %d", len(patch), MaxPatchBytes)
	}
	var cur *File
	inHunk, binary := false, false
	oldLeft, newLeft := 0, 0
	lines := bytes.SplitAfter(patch, []byte("\n"))
	for i := 0; i < len(lines); i++ {
		raw := lines[i]
		if len(raw) == 0 {
			continue
		}
		if raw[len(raw)-1] != '\n' {
			return s, refuse("", "line %d does not end in a newline", i+1)
		}
		line := string(raw[:len(raw)-1])
		if inHunk && (oldLeft > 0 || newLeft > 0) {
			if err := hunkLine(cur, line, i+1, &oldLeft, &newLeft); err != nil {
				return s, err
			}
			continue
		}
		if inHunk && strings.HasPrefix(line, `\`) { // "\ No newline at end of file" after the last line
			continue
		}
		inHunk = false
		switch {
		case strings.HasPrefix(line, "diff --git "):
			if len(s.Files) >= MaxFiles {
				return s, refuse("", "the change touches more than %d files", MaxFiles)
			}
			a, b, err := splitGitHeader(line[len("diff --git "):])
			if err != nil {
				return s, refuse("", "line %d: %v", i+1, err)
			}
			s.Files = append(s.Files, File{OldPath: a, Path: b, Status: "modified"})
			cur = &s.Files[len(s.Files)-1]
			binary = false
		case cur == nil:
			return s, refuse("", "line %d comes before any \"diff --git\" header", i+1)
		case binary:
			// base85 lines of a literal or delta, "literal N", "delta N", blank between.
			if line != "" && !strings.HasPrefix(line, "literal ") && !strings.HasPrefix(line, "delta ") && !isBase85Line(line) {
				return s, refuse(cur.name(), "line %d is not part of a binary patch", i+1)
			}
		case strings.HasPrefix(line, "@@ "):
			o, n, err := hunkCounts(line)
			if err != nil {
				return s, refuse(cur.name(), "line %d: %v", i+1, err)
			}
			inHunk, oldLeft, newLeft, cur.body = true, o, n, true
		case cur.body:
			// git apply ends a file's patch at its last hunk and reads on
			// as a new (traditional) patch from a "---" line: a header
			// here would be read differently.
			return s, refuse(cur.name(), "line %d: a header line after the file's hunks", i+1)
		case line == "GIT binary patch":
			binary, cur.Binary, cur.body = true, true, true
		default:
			if err := cur.header(line); err != nil {
				return s, refuse(cur.name(), "line %d: %v", i+1, err)
			}
		}
	}
	if inHunk && (oldLeft > 0 || newLeft > 0) {
		return s, refuse(cur.name(), "the patch ends inside a hunk")
	}
	summarize(&s)
	if err := Check(s); err != nil {
		return s, err
	}
	return s, visitsOnce(s)
}

// hunkLine takes line n of the patch, inside a hunk of cur's with oldLeft
// and newLeft lines of each side still to come, and counts it.
func hunkLine(cur *File, line string, n int, oldLeft, newLeft *int) error {
	switch {
	case strings.HasPrefix(line, "+"):
		cur.Added++
		*newLeft--
		cur.addTarget(line[1:])
	case strings.HasPrefix(line, "-"):
		cur.Deleted++
		*oldLeft--
	case strings.HasPrefix(line, " "), line == "":
		*oldLeft--
		*newLeft--
		if line != "" {
			cur.addTarget(line[1:])
		}
	case strings.HasPrefix(line, `\`):
	default:
		return refuse(cur.name(), "line %d is not part of a hunk", n)
	}
	if *oldLeft < 0 || *newLeft < 0 {
		return refuse(cur.name(), "line %d: a hunk longer than its header says", n)
	}
	return nil
}

// visitsOnce refuses a patch that comes back to a directory it left, as
// git diff never does (its files are in path order). git apply writes the
// files in the patch's order, converting each by the .gitattributes it
// reads when it enters the file's directory: a patch that wrote
// d/.gitattributes (* ident eol=crlf, or a filter the user defined), left
// d and came back to write d/file had d/file written converted, not as
// diff showed it (the agent's diff.orderFile made such a patch).
func visitsOnce(s Summary) error {
	if weakened {
		return nil
	}
	left := map[string]bool{}
	open := "."
	for _, f := range s.Files {
		d := path.Dir(f.name())
		for open != "." && d != open && !strings.HasPrefix(d, open+"/") {
			left[open] = true
			open = path.Dir(open)
		}
		for x := d; x != open; x = path.Dir(x) {
			if left[x] {
				return refuse(f.name(), "out of git's order: the change comes back to %s after other directories (git apply would write it by a .gitattributes the change wrote before)", strconv.Quote(x))
			}
		}
		open = d
	}
	return nil
}

// summarize fills in what follows from the files read: a deleted file's
// path as its old one, the totals, which files the host runs.
func summarize(s *Summary) {
	for i := range s.Files {
		f := &s.Files[i]
		if f.OldMode == "" {
			f.OldMode = f.indexMode
		}
		if f.Status == "deleted" {
			f.OldPath, f.Path = f.Path, ""
		} else {
			f.NewMode = f.newMode()
			if f.OldPath == f.Path {
				f.OldPath = ""
			}
		}
		if f.OldMode != "" && f.NewMode != "" && f.OldMode != f.NewMode {
			s.ModeChanges++
		}
		s.Added += f.Added
		s.Deleted += f.Deleted
		if f.HostRun = HostRun(f.name()); f.HostRun == "" && f.NewMode == "100755" && f.OldMode != "100755" {
			f.HostRun = newProgramReason
		}
	}
}

// newProgramReason is why a file the change makes executable is named: a
// shell runs it by its name where its directory is on PATH (an .envrc's
// PATH_add bin), a bin/git before the host's git.
const newProgramReason = "a new program: your shell runs it by its name where its directory is on your PATH (an .envrc's PATH_add or layout)"

// newMode is the mode git apply gives the file: the one a "new mode" or
// "new file mode" line says, else its old mode (an "old mode" or "index"
// line's). "" when the patch says none: git apply then keeps the mode the
// file has in the checkout (see Apply, which looks there).
func (f *File) newMode() string {
	switch {
	case f.NewMode != "":
		return f.NewMode
	case f.OldMode != "":
		return f.OldMode
	}
	return f.indexMode
}

// addTarget adds a line of the file's content after the change to its
// target, when the file is then a symlink: all of them, newlines between,
// so that no line of a symlink's content goes unchecked.
func (f *File) addTarget(l string) {
	if f.newMode() != "120000" {
		return
	}
	if f.Target != "" {
		f.Target += "\n"
	}
	f.Target += l
}

func (f *File) name() string {
	if f == nil {
		return ""
	}
	if f.Path != "" {
		return f.Path
	}
	return f.OldPath
}

// header reads one extended header line of git's diff format.
func (f *File) header(line string) error {
	word, rest, _ := strings.Cut(line, " ")
	switch word {
	case "similarity", "dissimilarity":
		return nil
	case "index":
		m := indexLine().FindStringSubmatch(rest)
		if m == nil {
			return fmt.Errorf("bad index line %q", line)
		}
		if m[1] != "" && f.indexMode != "" {
			return fmt.Errorf("a second index line %q", line)
		}
		f.indexMode = m[1]
		return nil
	case "---", "+++":
		if !strings.HasPrefix(rest, `"`) && strings.IndexFunc(rest, isControl) >= 0 {
			// git apply's name ends at a tab, CR or other space but ' ':
			// git writes such a name quoted.
			return fmt.Errorf("%s names %q unquoted, with a control character", word, rest)
		}
		p, err := unquote(rest)
		if err != nil {
			return err
		}
		if p == "/dev/null" {
			return nil
		}
		want := f.OldPath
		prefix := "a/"
		if word == "+++" {
			want, prefix = f.Path, "b/"
		}
		if p != prefix+want {
			return fmt.Errorf("%s names %q, not the header's %q", word, p, prefix+want)
		}
		return nil
	case "old", "new", "deleted":
		kind, mode, _ := strings.Cut(rest, " ")
		switch {
		case word == "old" && kind == "mode":
			f.OldMode = mode
		case word == "new" && kind == "mode":
			f.NewMode = mode
		case word == "new" && kind == "file" && strings.HasPrefix(mode, "mode "):
			f.Status, f.NewMode = "added", strings.TrimPrefix(mode, "mode ")
		case word == "deleted" && kind == "file" && strings.HasPrefix(mode, "mode "):
			f.Status, f.OldMode = "deleted", strings.TrimPrefix(mode, "mode ")
		default:
			return fmt.Errorf("unknown header %q", line)
		}
		return nil
	case "rename", "copy":
		dir, p, _ := strings.Cut(rest, " ")
		p, err := unquote(p)
		if err != nil {
			return err
		}
		switch dir {
		case "from":
			if p != f.OldPath {
				return fmt.Errorf("%s from %q, not the header's %q", word, p, f.OldPath)
			}
		case "to":
			if p != f.Path {
				return fmt.Errorf("%s to %q, not the header's %q", word, p, f.Path)
			}
		default:
			return fmt.Errorf("unknown header %q", line)
		}
		f.Status = word + "d"
		if word == "copy" {
			f.Status = "copied"
		}
		return nil
	case "Binary":
		f.Binary = true // "Binary files a/x and b/x differ": no content, git apply refuses it
		return fmt.Errorf("a binary change without its content (made without --binary)")
	}
	return fmt.Errorf("unknown header %q", line)
}

// indexLine is an "index OLD..NEW[ MODE]" line's rest as git diff writes
// it; MODE is what git apply takes as the file's old mode. It is compiled
// at its first use: its counted repeats make a program of some 100 KB,
// 1.3 ms at every start of every mosaic process that links this package
// (the CLI at each run and start), which only a finish step needs.
var indexLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-f]{7,64}\.\.[0-9a-f]{7,64}(?: ([0-7]{6}))?$`)
})

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// hunkCounts reads "@@ -a,b +c,d @@": the old and new line counts.
func hunkCounts(line string) (int, int, error) {
	fields := strings.Fields(line)
	if len(fields) < 4 || fields[3] != "@@" && !strings.HasPrefix(fields[3], "@@") {
		return 0, 0, fmt.Errorf("bad hunk header %q", line)
	}
	count := func(r, sign string) (int, error) {
		r, ok := strings.CutPrefix(r, sign)
		if !ok {
			return 0, fmt.Errorf("bad hunk range %q", r)
		}
		start, n, has := strings.Cut(r, ",")
		if _, err := strconv.ParseUint(start, 10, 31); err != nil {
			return 0, fmt.Errorf("bad hunk range %q", r)
		}
		if !has {
			return 1, nil
		}
		v, err := strconv.ParseUint(n, 10, 31)
		return int(v), err
	}
	o, err := count(fields[1], "-")
	if err != nil {
		return 0, 0, err
	}
	n, err := count(fields[2], "+")
	return o, n, err
}

func isBase85Line(l string) bool {
	if len(l) < 2 {
		return false
	}
	c := l[0] // the length letter: A-Z 1-26 bytes, a-z 27-52
	if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
		return false
	}
	for i := 1; i < len(l); i++ {
		if strings.IndexByte(base85, l[i]) < 0 {
			return false
		}
	}
	return true
}

const base85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"

// splitGitHeader splits the two paths of "diff --git a/X b/Y", quoted as
// git quotes them or not. Unquoted, the line is ambiguous when a path holds
// " b/"; git writes such a header only with a/X equal to b/X, so the middle
// is taken, as git apply does.
func splitGitHeader(s string) (string, string, error) {
	if strings.HasPrefix(s, `"`) {
		end := closingQuote(s)
		if end < 0 {
			return "", "", fmt.Errorf("unterminated quote in %q", s)
		}
		a, err := unquote(s[:end+1])
		if err != nil {
			return "", "", err
		}
		b, err := unquote(strings.TrimPrefix(s[end+1:], " "))
		if err != nil {
			return "", "", err
		}
		return strip(a, "a/"), strip(b, "b/"), checkPrefixes(a, b)
	}
	if i := strings.Index(s, ` "`); i >= 0 {
		b, err := unquote(s[i+1:])
		if err != nil {
			return "", "", err
		}
		return strip(s[:i], "a/"), strip(b, "b/"), checkPrefixes(s[:i], b)
	}
	if len(s)%2 == 1 {
		a, b := s[:len(s)/2], s[len(s)/2+1:]
		if s[len(s)/2] == ' ' && strings.HasPrefix(a, "a/") && strings.HasPrefix(b, "b/") && a[2:] == b[2:] {
			return a[2:], b[2:], nil
		}
	}
	a, b, ok := strings.Cut(s, " b/")
	if !ok || strings.Contains(b, " b/") {
		return "", "", fmt.Errorf("cannot tell the two paths apart in %q", s)
	}
	return strip(a, "a/"), b, checkPrefixes(a, "b/"+b)
}

func checkPrefixes(a, b string) error {
	if !strings.HasPrefix(a, "a/") || !strings.HasPrefix(b, "b/") {
		return fmt.Errorf("paths %q and %q lack git's a/ and b/", a, b)
	}
	return nil
}

func strip(p, prefix string) string { return strings.TrimPrefix(p, prefix) }

func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// unquote reads a path as git writes it: as is, or in C-style quotes with
// octal escapes for bytes outside printable ASCII.
func unquote(p string) (string, error) {
	if !strings.HasPrefix(p, `"`) {
		return p, nil
	}
	if len(p) < 2 || p[len(p)-1] != '"' {
		return "", fmt.Errorf("bad quoted path %q", p)
	}
	var b strings.Builder
	in := p[1 : len(p)-1]
	for i := 0; i < len(in); i++ {
		c := in[i]
		if c != '\\' {
			if c == '"' {
				return "", fmt.Errorf("bad quoted path %q", p)
			}
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(in) {
			return "", fmt.Errorf("bad quoted path %q", p)
		}
		switch e := in[i]; e {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'v':
			b.WriteByte('\v')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case '"', '\\':
			b.WriteByte(e)
		default:
			if i+2 >= len(in) || e < '0' || e > '3' {
				return "", fmt.Errorf("bad escape in quoted path %q", p)
			}
			v, err := strconv.ParseUint(in[i:i+3], 8, 8)
			if err != nil {
				return "", fmt.Errorf("bad escape in quoted path %q", p)
			}
			b.WriteByte(byte(v))
			i += 2
		}
	}
	return b.String(), nil
}

// Check refuses a change mosaic may not write into a checkout.
func Check(s Summary) error {
	if weakened {
		return nil
	}
	symlinks := map[string]bool{}
	for _, f := range s.Files {
		for _, p := range []string{f.Path, f.OldPath} {
			if p == "" {
				continue
			}
			if err := VerifyPath(p); err != nil {
				return err
			}
		}
		for _, m := range []string{f.OldMode, f.NewMode} {
			switch m {
			case "", "100644", "100755", "120000":
			case "160000":
				return refuse(f.name(), "a gitlink (a submodule's commit): mosaic never writes one into your checkout")
			default:
				return refuse(f.name(), "mode %s is not a file's or a symlink's", m)
			}
		}
		if f.Path != "" && f.NewMode == "120000" || f.Target != "" {
			if err := checkTarget(f.Path, f.Target); err != nil {
				return err
			}
			symlinks[f.Path] = true
		}
	}
	// A path twice: git apply applies the second to what the first made
	// (its mode too), which this check would not see. git diff names a
	// path twice only for a change of type: deleted, then added.
	seen := map[string]string{}
	for _, f := range s.Files {
		for _, p := range []string{f.OldPath, f.Path} {
			if p == "" {
				continue
			}
			if was, ok := seen[p]; ok && !(was == "deleted" && f.Status == "added") {
				return refuse(p, "named twice in one change")
			}
			seen[p] = f.Status
		}
	}
	// A write through a symlink the same change makes: a/link -> dir, then a/link/x.
	for _, f := range s.Files {
		for _, p := range []string{f.Path, f.OldPath} {
			for d := path.Dir(p); p != "" && d != "."; d = path.Dir(d) {
				if symlinks[d] {
					return refuse(p, "written through %s, a symlink the same change makes", d)
				}
			}
		}
	}
	return nil
}

// checkTarget refuses a symlink at p whose target is absolute or leads
// out of the repository (read lexically from the link's directory).
func checkTarget(p, target string) error {
	if target == "" {
		return refuse(p, "a symlink without a target")
	}
	if strings.HasPrefix(target, "/") {
		return refuse(p, "a symlink to %s, outside the repository", strconv.Quote(target))
	}
	depth := strings.Count(p, "/")
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "..":
			depth--
		case "", ".":
		default:
			depth++
		}
		if depth < 0 {
			return refuse(p, "a symlink to %s, which leads out of the repository", strconv.Quote(target))
		}
	}
	if VerifyPath(path.Join(path.Dir(p), target)) != nil {
		return refuse(p, "a symlink to %s, into .git", strconv.Quote(target))
	}
	return nil
}
