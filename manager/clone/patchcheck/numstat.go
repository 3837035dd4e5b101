package patchcheck

import (
	"bytes"
	"strconv"
)

// MaxNumstatBytes bounds the file list a finish step writes for a change
// over MaxPatchBytes (git diff --numstat -z).
const MaxNumstatBytes = 8 << 20

// ParseNumstat reads git diff --numstat -z --no-renames output
// ("added\tdeleted\tpath\0"; "-\t-\t" for a binary file) into a summary
// of a change too large to read as a patch: its files and line counts,
// each path checked as Check checks a patch's. Statuses are not known
// from it: each file is "modified".
func ParseNumstat(b []byte) (Summary, error) {
	var s Summary
	if len(b) > MaxNumstatBytes {
		return s, refuse("", "the file list is %d bytes, over the bound of %d", len(b), MaxNumstatBytes)
	}
	for _, rec := range bytes.Split(b, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		f := bytes.SplitN(rec, []byte{'\t'}, 3)
		if len(f) != 3 {
			return s, refuse("", "the file list has a line git does not write: %q", truncate(rec))
		}
		file := File{Path: string(f[2]), Status: "modified"}
		if err := VerifyPath(file.Path); err != nil {
			return s, err
		}
		file.HostRun = HostRun(file.Path)
		if string(f[0]) == "-" && string(f[1]) == "-" {
			file.Binary = true
		} else {
			a, aerr := strconv.Atoi(string(f[0]))
			d, derr := strconv.Atoi(string(f[1]))
			if aerr != nil || derr != nil || a < 0 || d < 0 {
				return s, refuse(file.Path, "the file list's counts are not numbers: %q", truncate(rec))
			}
			file.Added, file.Deleted = a, d
			s.Added += a
			s.Deleted += d
		}
		if len(s.Files) == MaxFiles {
			return s, refuse("", "the change touches more than %d files", MaxFiles)
		}
		s.Files = append(s.Files, file)
	}
	return s, nil
}

// truncate keeps the first 80 bytes of a record for an error.
func truncate(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}
