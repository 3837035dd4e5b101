// Package stagebin finds the stage binary (cmd/mosaic-stage: the exec shim,
// the init and the session-ended stage) beside mosaic, and
// checks that it is the one this mosaic was built with: a session whose
// stages are another build's would check a sandbox another build
// promised, so none starts with one.
//
// Two binaries were built together when their Go build information agrees
// (debug/buildinfo, read from the file without running it): the Go
// version, the main module's version and sum, every build setting (the
// flags, the build tags, -ldflags with make's stamp, the VCS revision, its
// time and whether the tree was modified), and each module the stage links
// at the version mosaic links. A plain `go build ./cmd/...` of one tree
// gives a matching pair; a weakened or test-hooked build (another -tags)
// never passes for the plain one. In a modified tree two builds of the
// same revision look alike to Go: make's COMMIT stamp carries a hash of
// the modification, so `make build` tells them apart.
package stagebin

import (
	"crypto/sha256"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"mosaic/internal/errcode"
	"mosaic/internal/regfile"
)

// Name is the stage binary's file name, beside mosaic's.
const Name = "mosaic-stage"

// Find is the stage binary beside mosaicBin, once checked against ours,
// mosaicBin's build information (Ours when it is this process); else a
// refusal that says what to do. cache, when not "", is the file that
// keeps the last check that passed (see checked): a pass not taken from it
// is kept by calling keepCheck, which the caller does once its request is
// known to be good (bad input writes nothing); it is never nil.
func Find(mosaicBin string, ours *debug.BuildInfo, cache string) (path string, keepCheck func(), err error) {
	none := func() {}
	path = filepath.Join(filepath.Dir(mosaicBin), Name)
	// Opened once: the check kept is keyed by the file whose build
	// information is read, never by another lookup of the path (a link
	// retargeted between the two had another build's stage taken from the
	// cache at every later start). O_NONBLOCK: a FIFO there is refused,
	// not waited on.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	var fi fs.FileInfo
	if err == nil {
		defer f.Close()
		fi, err = f.Stat()
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		// Unreadable (mode 0): refused by its mode as before it was opened.
		if st, serr := os.Stat(path); serr == nil && (!st.Mode().IsRegular() || st.Mode()&0o111 == 0) {
			fi, err = st, nil
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return "", none, errcode.StageMissing.New("%s is missing: sessions run their sandbox's stages from it, so nothing was started; install it beside %s (make install, or go build -o %s/ ./cmd/mosaic ./cmd/mosaic-stage ./cmd/mosaic-net)", path, mosaicBin, filepath.Dir(mosaicBin))
	}
	if err == nil && (!fi.Mode().IsRegular() || fi.Mode()&0o111 == 0) {
		return "", none, errcode.StageMissing.New("%s is not an executable file: sessions run their sandbox's stages from it, so nothing was started; install mosaic and mosaic-stage together (make install)", path)
	}
	key := ""
	if err == nil && cache != "" && ours != nil {
		if key = keyOf(fi, ours); key != "" && checked(cache, key) {
			return path, none, nil
		}
	}
	var theirs *debug.BuildInfo
	if err == nil {
		theirs, err = readInfo(f)
	}
	if err != nil {
		return "", none, errcode.StageMismatch.New("%s cannot be read as mosaic's stage binary (%w), so nothing was started: install mosaic and mosaic-stage together (make install)", path, err)
	}
	if why := differ(ours, theirs); why != "" {
		return "", none, errcode.StageMismatch.New("%s is not the one this mosaic was built with (%s), so nothing was started: install mosaic and mosaic-stage together (make install)", path, why)
	}
	if key == "" {
		return path, none, nil
	}
	return path, func() { keep(cache, key) }, nil
}

// NetName is the network device's binary (cmd/mosaic-net), beside the
// stage binary.
const NetName = "mosaic-net"

// FindNet is mosaic-net beside mosaicBin when it is of ours's build, else
// "" and why not: a session then has no network device (its proxy-aware
// clients alone reach the proxy), which status and doctor say. Its build
// information is read at each call (0.2 ms of a start of a session in
// network allow).
func FindNet(mosaicBin string, ours *debug.BuildInfo) (string, error) {
	path := filepath.Join(filepath.Dir(mosaicBin), NetName)
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err == nil && (!fi.Mode().IsRegular() || fi.Mode()&0o111 == 0) {
		err = fmt.Errorf("not an executable file")
	}
	var theirs *debug.BuildInfo
	if err == nil {
		theirs, err = readInfo(f)
	}
	if err == nil {
		if why := differ(ours, theirs); why != "" {
			err = fmt.Errorf("not of this mosaic's build: %s", why)
		}
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return path, nil
}

// The check above reads the stage binary's build information at every
// start (0.17 ms of a start's CPU, issue 32), so the last check that
// passed is kept in a file in mosaic's runtime directory, keyed by the
// stage binary's identity and times (device, inode, size, mode, mtime and
// ctime, in nanoseconds) and by a hash of the build information it was
// checked against. A start whose stage binary and build still have that
// key takes the check as passed; any change to the file (replaced: another
// inode; rewritten in place: another mtime and ctime, which no process
// can set back) or another mosaic is read and checked again. Only a pass
// is kept: a refusal is always made from the file itself. A file changed
// within keySettle of the check is not kept (a file system's clock is
// coarse: a second change in the same tick could look like none). The
// runtime directory is the user's own and no session sees it.

// readInfo reads the build information of the open binary f (a test counts
// the reads).
var readInfo = func(f *os.File) (*debug.BuildInfo, error) { return buildinfo.Read(f) }

// cacheHeader is the first line of a cache file of this format.
const cacheHeader = "mosaic stage check 2\n"

// keySettle is how long before a check the stage binary must have last
// changed for the check to be kept (a test shortens it).
var keySettle = 3 * time.Second

// keyOf is the key of a check of the stage binary fi against ours, or ""
// when fi cannot be keyed or changed too recently.
func keyOf(fi fs.FileInfo, ours *debug.BuildInfo) string {
	state := regfile.StateKey(fi, time.Now().Add(-keySettle))
	if state == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(ours.String()))
	return fmt.Sprintf("%s %x\n", state, sum)
}

// checked reports whether cache holds key.
func checked(cache, key string) bool {
	b, err := regfile.Read(cache, true, 4096)
	return err == nil && string(b) == cacheHeader+key
}

// keep writes key into cache, or nothing when it cannot: the next start
// checks the stage binary again.
func keep(cache, key string) {
	if os.MkdirAll(filepath.Dir(cache), 0o700) == nil {
		_ = regfile.WriteAtomic(cache, []byte(cacheHeader+key))
	}
}

// Ours is this process's build information, or nil where it has none.
func Ours() *debug.BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return bi
}

// Of is the build information of the binary at path, or nil where it has
// none.
func Of(path string) *debug.BuildInfo {
	bi, _ := buildinfo.ReadFile(path)
	return bi
}

// differ says how the builds of a and b differ, or "" for two built
// together.
func differ(a, b *debug.BuildInfo) string {
	if a == nil {
		return "mosaic has no build information to check it against"
	}
	switch {
	case a.GoVersion != b.GoVersion:
		return "built by " + b.GoVersion + ", mosaic by " + a.GoVersion
	case a.Main.Version != b.Main.Version || a.Main.Sum != b.Main.Sum:
		return "of version " + b.Main.Version + ", mosaic of " + a.Main.Version
	}
	settings := func(bi *debug.BuildInfo) map[string]string {
		m := map[string]string{}
		for _, s := range bi.Settings {
			m[s.Key] = s.Value
		}
		return m
	}
	as, bs := settings(a), settings(b)
	for k, v := range bs {
		if as[k] != v {
			return "its build setting " + k + " is " + quote(v) + ", mosaic's " + quote(as[k])
		}
	}
	for k := range as {
		if _, ok := bs[k]; !ok {
			return "it lacks mosaic's build setting " + k
		}
	}
	deps := map[string]string{}
	for _, d := range a.Deps {
		deps[d.Path] = d.Version + " " + d.Sum
	}
	for _, d := range b.Deps {
		if _, both := deps[d.Path]; !both && StageOnly[d.Path] {
			continue
		}
		if deps[d.Path] != d.Version+" "+d.Sum {
			return "it links " + d.Path + " " + d.Version + ", which mosaic does not"
		}
	}
	return ""
}

// StageOnly are the modules only mosaic-net links: the session's network
// stack (gVisor's) and what it needs. mosaic cannot
// check their versions against its own, which are not in its build
// information; a stage of another tree differs in its build settings
// (vcs.revision) or in a module both link. A test keeps the set the one
// the import graph gives.
var StageOnly = map[string]bool{
	"gvisor.dev/gvisor":       true,
	"github.com/google/btree": true,
	"golang.org/x/net":        true,
	"golang.org/x/time":       true,
}

// quote is v quoted for a message, "none" for an empty one.
func quote(v string) string {
	if v == "" {
		return "none"
	}
	return `"` + v + `"`
}
