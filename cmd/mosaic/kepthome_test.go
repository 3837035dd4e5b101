package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeptHomeHasNoMountPoints: bwrap makes a mount point in the session's
// home for every bind below HOME (a workspace under the user's home, a
// --ro path there), and in a kept home they piled up session after session,
// telling the next session of the name where the earlier ones worked. When
// a named session ends, the empty mount points are gone; what the session
// itself wrote in its home stays.
func TestKeptHomeHasNoMountPoints(t *testing.T) {
	needRig(t)
	for _, mode := range [][]string{{"run"}, {"run", "--scope"}} {
		t.Run(strings.Join(mode, " "), func(t *testing.T) {
			name := sessionName(t)
			home := filepath.Join(stateRoot(), "sessions", name, "home")
			for i := 0; i < 2; i++ {
				ws, ro := workspace(t), workspace(t)
				mustMosaic(t, append(mode, "--name", name, "-w", ws, "--ro", ro, "--", "sh", "-c", "mkdir -p $HOME/kept && echo x > $HOME/kept/file && test -d "+ws)...)
			}
			entries, err := os.ReadDir(home)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if strings.Join(names, " ") != "kept" {
				t.Errorf("the kept home holds %v, want only what the session wrote (kept)", names)
			}
		})
	}
}
