package main

import (
	"strings"
	"testing"
)

// The command gets stdin, stdout and stderr and no other descriptor of the
// layers above it: not the init's argv pipe (--argv-fd), not bwrap's, not
// the exec shim's (a scope's info and go pipes). The init marks them all
// close-on-exec (closeInherited); without that the argv pipe, at least,
// shows here.
func TestCommandInheritsOnlyStdio(t *testing.T) {
	needRig(t)
	for _, mode := range [][]string{{"run"}, {"run", "--scope", "--direct"}} {
		args := append(append([]string{}, mode...), "--pty=false", "--workspace", workspace(t), "--", "sh", "-c", "ls /proc/$$/fd")
		r := mustMosaic(t, args...)
		if got := strings.Join(strings.Fields(r.stdout), " "); got != "0 1 2" {
			t.Errorf("mosaic %s: the command's descriptors are %q, want 0 1 2", strings.Join(mode, " "), got)
		}
	}
}
