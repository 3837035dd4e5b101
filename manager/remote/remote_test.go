package remote

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseTarget(t *testing.T) {
	good := map[string]Target{
		"box":                   {Host: "box"},
		"dev@build-box":         {User: "dev", Host: "build-box"},
		"dev@10.1.2.3:2222":     {User: "dev", Host: "10.1.2.3", Port: 2222},
		"[::1]:22":              {Host: "::1", Port: 22},
		"::1":                   {Host: "::1"},
		"a.example.com:1":       {Host: "a.example.com", Port: 1},
		"u_1@h_2.example:65535": {User: "u_1", Host: "h_2.example", Port: 65535},
	}
	for in, want := range good {
		got, err := ParseTarget(in)
		if err != nil || got != want {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if err == nil && !strings.Contains(in, "[") && got.String() != in {
			t.Errorf("%q prints as %q", in, got.String())
		}
	}
	for _, in := range []string{"", "-oProxyCommand=x", "dev@-x", "@box", "box:0", "box:65536", "box:x", "b ox", "box;id", "$(id)", "box\n", "[::1", "[::1]x", "a'b", "dev@"} {
		if got, err := ParseTarget(in); err == nil {
			t.Errorf("ParseTarget(%q) = %+v, want an error", in, got)
		}
	}
}

// The remote command is mosaic's own words only, and a POSIX shell reads it
// back as the stage and its fixed arguments.
func TestRemoteCommandQuoting(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "mosaic")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nfor a; do printf '[%s]' \"$a\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	line := RemoteCommand(HoldStage, "it's", "/run/user/1/x y")
	cmd := exec.Command("sh", "-c", line)
	cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "HOME=" + dir}
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "[remote-hold]["+Protocol+"][it's][/run/user/1/x y]" {
		t.Errorf("the remote shell ran %q: %s %v", line, out, err)
	}
	cmd = exec.Command("sh", "-c", line)
	cmd.Env = []string{"PATH=" + t.TempDir() + ":/bin", "HOME=" + t.TempDir()}
	out, _ = cmd.CombinedOutput()
	if _, err := os.Stat("/usr/local/bin/mosaic"); err == nil {
		t.Log("/usr/local/bin/mosaic exists: not checking a host without mosaic")
	} else if cmd.ProcessState.ExitCode() != 127 || !strings.Contains(string(out), MissingMarker) {
		t.Errorf("without mosaic: exit %d, %q", cmd.ProcessState.ExitCode(), out)
	}
	args := SSHArgs(Target{User: "u", Host: "h", Port: 2}, true, ExecStage, 9)
	joined := strings.Join(args, " ")
	if !strings.Contains(joined, "-t") || !strings.Contains(joined, "-p 2") || !strings.Contains(joined, "-l u") || !strings.Contains(joined, "ConnectTimeout=9") || args[len(args)-3] != "--" || args[len(args)-2] != "h" {
		t.Errorf("SSHArgs: %q", args)
	}
}

func TestFrame(t *testing.T) {
	f := Frame{Args: []string{"run", "--", "sh", "-c", "echo 'x'\n"}, Env: map[string]string{"TERM": "xterm"}, Secrets: map[string]string{"KEY": `a "b" \c $d`}}
	var b bytes.Buffer
	if err := WriteFrame(&b, f); err != nil {
		t.Fatal(err)
	}
	b.WriteString("the command's own stdin")
	got, err := ReadFrame(&b)
	if err != nil || got.Secrets["KEY"] != f.Secrets["KEY"] || strings.Join(got.Args, "|") != strings.Join(f.Args, "|") {
		t.Fatalf("ReadFrame: %v %v", got, err)
	}
	if rest, _ := io.ReadAll(&b); string(rest) != "the command's own stdin" {
		t.Errorf("ReadFrame read past its frame: left %q", rest)
	}
	if strings.Contains(got.String(), "$d") {
		t.Errorf("a frame prints its secret: %s", got)
	}
	for _, bad := range []string{"", "mosaic-frame 1 2\n{}", "mosaic-frame 2 99999999999\n", "nonsense\n", "mosaic-frame 2 5\n{}"} {
		if _, err := ReadFrame(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadFrame(%q) took it", bad)
		}
	}
	if err := WriteFrame(io.Discard, Frame{Secrets: map[string]string{"K": "a\nb"}}); err == nil {
		t.Error("a secret with a newline was sent")
	}
}

func TestHold(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "remote")
	var in bytes.Buffer
	if err := WriteFrame(&in, Frame{Args: []string{"run"}, Secrets: map[string]string{"K": "v"}}); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe() // the caller's ssh: open while the hold waits
	go func() { io.Copy(pw, &in) }()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Hold(pr, outW, dir) }()
	path, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	path, ok := strings.CutPrefix(strings.TrimSpace(path), HeldMarker)
	if !ok {
		t.Fatalf("the hold's answer does not start with %q", HeldMarker)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("hold dir: %v %v", fi, err)
	}
	if _, err := Fetch(dir, filepath.Join(dir, "../x.sock")); err == nil {
		t.Error("Fetch connected outside the hold dir")
	}
	f, err := Fetch(dir, path)
	if err != nil || f.Secrets["K"] != "v" {
		t.Fatalf("Fetch: %v %v", f, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Hold: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Hold did not return after giving its frame")
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("the hold's socket outlived it")
	}
	if _, err := net.Dial("unix", path); err == nil {
		t.Error("a second fetch was answered")
	}
}

// A hold whose caller went away (stdin at EOF) ends without giving anything.
func TestHoldCallerGone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "remote")
	var in bytes.Buffer
	WriteFrame(&in, Frame{Args: []string{"run"}})
	var out bytes.Buffer
	start := time.Now()
	err := Hold(&in, &out, dir) // a bytes.Buffer reaches EOF right after the frame
	if err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("Hold with its caller gone: %v after %s", err, time.Since(start))
	}
}
