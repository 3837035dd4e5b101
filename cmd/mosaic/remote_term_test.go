package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRemoteTerminalFilter (issue 40): what a session on another host
// prints reaches this terminal through the same filter as a local one's
// (run --pty over --host): the clipboard, the title and the questions are
// dropped whatever the remote's mosaic did, while the text and its colours
// pass. The weakened build on both sides (no filter) shows every sequence
// arriving first; this side's filter alone, with the weakened mosaic
// there, drops them.
func TestRemoteTerminalFilter(t *testing.T) {
	needRig(t)
	weak := weakenedMosaic(t)
	weakDir := t.TempDir()
	must(t, os.Symlink(weak, filepath.Join(weakDir, "mosaic")))
	for _, c := range []struct {
		name       string
		local      string
		remotePath string
		leak       bool
	}{
		{"weakened both sides", weak, weakDir, true},
		{"weakened there", mosaicBin, weakDir, false},
		{"mosaic", mosaicBin, filepath.Dir(mosaicBin), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := startSSHDPath(t, c.remotePath+":/usr/local/bin:/usr/bin:/bin")
			p := startOnPTYEnv(t, c.local, r.env, 24, 80, "--host", r.target, "run", "--pty", "--quiet", "-w", workspace(t), "--", "sh", "-c", termPayload)
			if code := p.wait(); code != 0 {
				t.Fatalf("run --pty over --host: exit %d\n%q", code, p.output())
			}
			checkTerminal(t, "run --pty over --host", p.output(), c.leak)
		})
	}
}
