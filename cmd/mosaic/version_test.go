package main

import (
	"regexp"
	"runtime/debug"
	"testing"
)

// mosaic version names a semantic version and the commit, from Go's build
// info (a plain go build or go install) or from the Makefile's stamp (issue 30).
func TestVersionOf(t *testing.T) {
	if !regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(Release) {
		t.Fatalf("Release %q is not a semantic version", Release)
	}
	info := func(kv ...string) *debug.BuildInfo {
		b := &debug.BuildInfo{}
		for i := 0; i+1 < len(kv); i += 2 {
			b.Settings = append(b.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return b
	}
	const id = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		info    *debug.BuildInfo
		stamped string
		want    buildVersion
		line    string
	}{
		{info("vcs.revision", id, "vcs.modified", "false"), "", buildVersion{Release, id, false}, Release + " (commit 0123456789ab)"},
		{info("vcs.revision", id, "vcs.modified", "true"), "", buildVersion{Release, id, true}, Release + " (commit 0123456789ab, modified)"},
		{info(), id + "-dirty", buildVersion{Release, id, true}, Release + " (commit 0123456789ab, modified)"},
		{info(), id + "-dirty-0a1b2c3d4e5f", buildVersion{Release, id, true}, Release + " (commit 0123456789ab, modified)"},
		{nil, id, buildVersion{Release, id, false}, Release + " (commit 0123456789ab)"},
		{info("vcs.revision", id), "ffff", buildVersion{Release, id, false}, Release + " (commit 0123456789ab)"},
		{nil, "", buildVersion{Version: Release}, Release + " (commit unknown)"},
	} {
		got := versionOf(tc.info, tc.stamped)
		if got != tc.want || got.String() != tc.line {
			t.Errorf("versionOf(%v, %q) = %+v %q, want %+v %q", tc.info, tc.stamped, got, got.String(), tc.want, tc.line)
		}
	}
}
