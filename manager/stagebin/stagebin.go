// Package stagebin finds the stage binary (cmd/mosaic-stage: the exec shim,
// the init, the session-ended stage and a run's tie) beside mosaic, and
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
	"debug/buildinfo"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"

	"mosaic/units/errcode"
)

// Name is the stage binary's file name, beside mosaic's.
const Name = "mosaic-stage"

// Find is the stage binary beside mosaicBin, once checked against ours,
// mosaicBin's build information (Ours when it is this process); else a
// refusal that says what to do.
func Find(mosaicBin string, ours *debug.BuildInfo) (string, error) {
	path := filepath.Join(filepath.Dir(mosaicBin), Name)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", errcode.StageMissing.New("%s is missing: sessions run their sandbox's stages from it, so nothing was started; install it beside %s (make install, or go build -o %s/ ./cmd/mosaic ./cmd/mosaic-stage)", path, mosaicBin, filepath.Dir(mosaicBin))
	}
	if err == nil && (!fi.Mode().IsRegular() || fi.Mode()&0o111 == 0) {
		return "", errcode.StageMissing.New("%s is not an executable file: sessions run their sandbox's stages from it, so nothing was started; install mosaic and mosaic-stage together (make install)", path)
	}
	var theirs *debug.BuildInfo
	if err == nil {
		theirs, err = buildinfo.ReadFile(path)
	}
	if err != nil {
		return "", errcode.StageMismatch.New("%s cannot be read as mosaic's stage binary (%v), so nothing was started: install mosaic and mosaic-stage together (make install)", path, err)
	}
	if why := differ(ours, theirs); why != "" {
		return "", errcode.StageMismatch.New("%s is not the one this mosaic was built with (%s), so nothing was started: install mosaic and mosaic-stage together (make install)", path, why)
	}
	return path, nil
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
		if deps[d.Path] != d.Version+" "+d.Sum {
			return "it links " + d.Path + " " + d.Version + ", which mosaic does not"
		}
	}
	return ""
}

// quote is v quoted for a message, "none" for an empty one.
func quote(v string) string {
	if v == "" {
		return "none"
	}
	return `"` + v + `"`
}
