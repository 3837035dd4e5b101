package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadInput: each bad request is one clear line, exit 2, a stable code in
// JSON, and changes nothing: no unit, no state directory.
func TestBadInput(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	file := filepath.Join(ws, "a-file")
	os.WriteFile(file, nil, 0o600)
	cases := []struct {
		label string
		args  []string
		code  string
	}{
		{"uppercase name", []string{"--name", "Bad", "--workspace", ws, "--", "true"}, "bad-name"},
		{"slash in name", []string{"--name", "a/b", "--workspace", ws, "--", "true"}, "bad-name"},
		{"dot in name", []string{"--name", "a.b", "--workspace", ws, "--", "true"}, "bad-name"},
		{"percent in name", []string{"--name", "a%b", "--workspace", ws, "--", "true"}, "bad-name"},
		{"space in name", []string{"--name", "a b", "--workspace", ws, "--", "true"}, "bad-name"},
		{"name over 63", []string{"--name", strings.Repeat("a", 64), "--workspace", ws, "--", "true"}, "bad-name"},
		{"empty name", []string{"--name", "", "--workspace", ws, "--", "true"}, "bad-name"},
		{"missing workspace", []string{"--workspace", filepath.Join(ws, "nope"), "--", "true"}, "bad-workspace"},
		{"workspace is a file", []string{"--workspace", file, "--", "true"}, "bad-workspace"},
		{"workspace is /", []string{"--workspace", "/", "--", "true"}, "bad-workspace"},
		{"workspace is home", []string{"--workspace", homeDir(), "--", "true"}, "bad-workspace"},
		{"workspace above home", []string{"--workspace", filepath.Dir(homeDir()), "--", "true"}, "bad-workspace"},
		{"workspace is runtime dir", []string{"--workspace", os.Getenv("XDG_RUNTIME_DIR"), "--", "true"}, "bad-workspace"},
		{"workspace in session state", []string{"--workspace", filepath.Dir(stateRoot()), "--", "true"}, "bad-workspace"},
		{"no command", []string{"--workspace", ws}, "no-command"},
		{"unknown flag", []string{"--no-such-flag", "--workspace", ws, "--", "true"}, "usage"},
		{"bad memory", []string{"--memory-max", "lots", "--workspace", ws, "--", "true"}, "bad-limit"},
		{"bad runtime", []string{"--runtime-max", "10x", "--workspace", ws, "--", "true"}, "bad-duration"},
		{"--ro missing", []string{"--ro", filepath.Join(ws, "nope"), "--workspace", ws, "--", "true"}, "bad-bind"},
		{"--rw home", []string{"--rw", homeDir(), "--workspace", ws, "--", "true"}, "bad-bind"},
		{"--ro runtime dir", []string{"--ro", "/run", "--workspace", ws, "--", "true"}, "bad-bind"},
		{"unknown sandbox", []string{"--sandbox", "lxc", "--workspace", ws, "--", "true"}, "bad-sandbox"},
		{"landlock may-launch", []string{"--sandbox", "landlock", "--may-launch", "--workspace", ws, "--", "true"}, "bad-sandbox"},
	}
	before := mosaicUnits(t)
	for _, verb := range []string{"start", "run"} {
		for _, tc := range cases {
			t.Run(verb+"/"+tc.label, func(t *testing.T) {
				if tc.label == "workspace in session state" {
					os.MkdirAll(stateRoot(), 0o700)
				}
				r := mosaic(t, append([]string{verb, "--json"}, tc.args...)...)
				if r.code != 2 {
					t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
				}
				if code, msg := jsonError(t, r); code != tc.code || msg == "" {
					t.Errorf("code %q (%s), want %q", code, msg, tc.code)
				}
				text := mosaic(t, append([]string{verb}, tc.args...)...)
				line := strings.TrimSpace(text.stderr)
				if text.code != 2 || line == "" || strings.Contains(line, "\n") || !strings.HasPrefix(line, "mosaic: ") {
					t.Errorf("text mode: exit %d, stderr %q; want exit 2 and one line", text.code, text.stderr)
				}
			})
		}
	}
	if after := mosaicUnits(t); after != before {
		t.Errorf("bad input changed the units:\nbefore: %s\nafter: %s", before, after)
	}
	for _, bad := range []string{"Bad", "a", strings.Repeat("a", 64)} {
		if _, err := os.Stat(filepath.Join(stateRoot(), "sessions", bad)); err == nil {
			t.Errorf("bad input left a state directory for %q", bad)
		}
	}
	for _, args := range [][]string{{"stop"}, {"stop", "a", "Bad_Name"}, {"status"}, {"stop", "Bad"}, {"status", "a.b"}, {"nonsense"}} {
		if r := mosaic(t, args...); r.code != 2 {
			t.Errorf("mosaic %v: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
}

// TestSandboxUnavailable: with no working bwrap there is no unconfined
// fallback: the start is refused with bwrap's own reason, and nothing starts.
func TestSandboxUnavailable(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	failing := filepath.Join(ws, "bwrap")
	os.WriteFile(failing, []byte("#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"), 0o700)
	for label, tc := range map[string]struct{ bwrap, reason string }{
		"missing": {filepath.Join(ws, "no-bwrap"), "no-bwrap"},
		"failing": {failing, "No permissions to create new namespace"},
	} {
		for _, verb := range []string{"start", "run"} {
			t.Run(label+"/"+verb, func(t *testing.T) {
				name := sessionName(t)
				r := mosaicWith(t, []string{"MOSAIC_BWRAP=" + tc.bwrap}, "", verb, "--json", "--name", name, "--workspace", ws, "--", "touch", filepath.Join(ws, "ran"))
				if r.code != 3 {
					t.Fatalf("exit %d, want 3\n%s%s", r.code, r.stdout, r.stderr)
				}
				code, msg := jsonError(t, r)
				if code != "sandbox-unavailable" || !strings.Contains(msg, tc.reason) {
					t.Errorf("code %q message %q; want sandbox-unavailable with %q", code, msg, tc.reason)
				}
				nothingMade(t, name, filepath.Join(ws, "ran"))
			})
		}
	}
}

// TestAnyScriptRuns (31.10): a long command in a script of several bytes a
// character runs whatever the padding puts at the Description's cut, in a
// service and a scope; an argument that is not UTF-8 runs byte for byte; a
// workspace that is not UTF-8 (which systemd's D-Bus interface cannot
// carry) is refused as bad-workspace, exit 2, nothing made.
func TestAnyScriptRuns(t *testing.T) {
	needRig(t)
	t.Parallel()
	ws := workspace(t)
	for pad := 0; pad < 3; pad++ {
		arg := strings.Repeat("x", pad) + strings.Repeat("修", 80)
		for _, scope := range []bool{false, true} {
			args := []string{"run", "--workspace", ws}
			if scope {
				args = append(args, "--scope", "--direct")
			}
			r := mosaic(t, append(args, "--", "printf", "%s", arg)...)
			if r.code != 0 || r.stdout != arg {
				t.Errorf("pad %d, scope %v: exit %d, stdout %q, stderr %s", pad, scope, r.code, r.stdout, r.stderr)
			}
		}
	}
	r := mosaic(t, "run", "--workspace", ws, "--", "printf", "%s", "a\xffb")
	if r.code != 0 || r.stdout != "a\xffb" {
		t.Errorf("an argument not UTF-8: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	bad := filepath.Join(ws, "ws-\xff")
	os.Mkdir(bad, 0o700)
	name := sessionName(t)
	r = mosaic(t, "start", "--json", "--name", name, "--workspace", bad, "--", "true")
	if code, msg := jsonError(t, r); r.code != 2 || code != "bad-workspace" || strings.Contains(msg, "bug") {
		t.Errorf("a workspace not UTF-8: exit %d, %s: %s", r.code, code, msg)
	}
	if _, err := os.Stat(filepath.Join(stateRoot(), "sessions", name)); err == nil {
		t.Error("a refused start left a state directory")
	}
	if u := mosaicUnits(t); strings.Contains(u, name) {
		t.Errorf("a refused start left a unit: %s", u)
	}
}
