package stagebin

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestDiffer: two builds agree when their Go, main module, settings and the
// stage's modules (a subset of mosaic's) agree; any one of those apart is
// named.
func TestDiffer(t *testing.T) {
	info := func(edit func(*debug.BuildInfo)) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Path: "mosaic/cmd/mosaic", Main: debug.Module{Path: "mosaic", Version: "(devel)"},
			Deps:     []*debug.Module{{Path: "golang.org/x/sys", Version: "v0.30.0", Sum: "h1:a"}, {Path: "github.com/godbus/dbus/v5", Version: "v5.1.0", Sum: "h1:b"}},
			Settings: []debug.BuildSetting{{Key: "-tags", Value: "urfave_cli_no_docs"}, {Key: "-ldflags", Value: "-X main.commit=abc"}, {Key: "vcs.modified", Value: "false"}}}
		if edit != nil {
			edit(bi)
		}
		return bi
	}
	mosaic := info(nil)
	stage := info(func(bi *debug.BuildInfo) { bi.Path, bi.Deps = "mosaic/cmd/mosaic-stage", bi.Deps[:1] })
	if why := differ(mosaic, stage); why != "" {
		t.Errorf("a pair of one build differs: %s", why)
	}
	for _, tc := range []struct {
		edit func(*debug.BuildInfo)
		want string
	}{
		{func(bi *debug.BuildInfo) { bi.GoVersion = "go1.26.7" }, "go1.26.7"},
		{func(bi *debug.BuildInfo) { bi.Main.Version = "v0.9.0" }, "v0.9.0"},
		{func(bi *debug.BuildInfo) { bi.Settings[0].Value = "urfave_cli_no_docs,mosaic_weakened" }, "-tags"},
		{func(bi *debug.BuildInfo) { bi.Settings[1].Value = "-X main.commit=def" }, "-ldflags"},
		{func(bi *debug.BuildInfo) { bi.Settings = bi.Settings[:2] }, "vcs.modified"},
		{func(bi *debug.BuildInfo) {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: "vcs.revision", Value: "0123"})
		}, "vcs.revision"},
		{func(bi *debug.BuildInfo) {
			bi.Deps = []*debug.Module{{Path: "golang.org/x/sys", Version: "v0.29.0", Sum: "h1:c"}}
		}, "golang.org/x/sys v0.29.0"},
	} {
		other := info(func(bi *debug.BuildInfo) { bi.Deps = bi.Deps[:1]; tc.edit(bi) })
		if why := differ(mosaic, other); !strings.Contains(why, tc.want) {
			t.Errorf("differ = %q, want it to name %q", why, tc.want)
		}
	}
	if why := differ(nil, stage); why == "" {
		t.Error("a mosaic without build information takes any stage binary")
	}
}
