package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBwraps are bwraps that pass mosaic's probe but do not build the
// sandbox they are asked for: the guard in mosaic's init must notice and
// refuse to run the command. reason is the guard's first complaint;
// reasonPIDs the one where the unit has a PID namespace of its own
// (PrivatePIDs, systemd 257+), in which an init run without bwrap is PID 1
// and so fails the next check.
var fakeBwraps = map[string]struct{ script, reason, reasonPIDs string }{
	// Runs the init directly, with no namespace and no mount at all.
	"no sandbox": {`#!/bin/sh
init=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	[ "$1" = "--ro-bind" ] && [ "$3" = /run/mosaic/init ] && init=$2
	shift
done
shift
[ -n "$init" ] && shift && set -- "$init" "$@"
exec "$@"
`, "not PID 1", "bwrap did not make a user namespace of its own"},
	// The real bwrap with the host's /proc in place of its own (issue 18.1).
	"host proc": {`#!/bin/sh
for a in "$@"; do
	shift
	case "$a" in --proc) set -- "$@" --ro-bind /proc ;; *) set -- "$@" "$a" ;; esac
done
exec /usr/bin/bwrap "$@"
`, "/proc is not the sandbox's own PID namespace's", "/proc is not the sandbox's own PID namespace's"},
	// The real bwrap without the PID namespace.
	"no PID namespace": {`#!/bin/sh
for a in "$@"; do
	shift
	case "$a" in --unshare-pid|--as-pid-1) ;; *) set -- "$@" "$a" ;; esac
done
exec /usr/bin/bwrap "$@"
`, "not PID 1", "not PID 1"},
}

func TestGuardRefusesAMissingSandbox(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	privatePIDs := managerVersion(t) >= 257
	for label, fake := range fakeBwraps {
		t.Run(label, func(t *testing.T) {
			reason := fake.reason
			if privatePIDs {
				reason = fake.reasonPIDs
			}
			bwrap := filepath.Join(ws, strings.ReplaceAll(label, " ", "-"))
			if err := os.WriteFile(bwrap, []byte(fake.script), 0o700); err != nil {
				t.Fatal(err)
			}
			name := sessionName(t)
			marker := filepath.Join(ws, "ran-"+name)
			r := mosaicWith(t, []string{"MOSAIC_BWRAP=" + bwrap}, "", "start", "--json", "--name", name, "--workspace", ws, "--", "touch", marker)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1 (the session did not start)\n%s%s", r.code, r.stdout, r.stderr)
			}
			code, msg := jsonError(t, r)
			if code != "start-failed" || !strings.Contains(msg, "refusing to run the command") || !strings.Contains(msg, reason) {
				t.Errorf("code %q message %q; want start-failed with the guard's reason %q", code, msg, reason)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the command ran in a sandbox that was not there")
			}
			if u := mosaicUnits(t); strings.Contains(u, name) {
				t.Errorf("unit left behind: %s", u)
			}
		})
	}
}
