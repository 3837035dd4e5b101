package remote

import (
	"bytes"
	"os"
	"reflect"
	"testing"
)

// A frame's command line runs with its secrets in a file of their own
// (--env-file, after the command's name), never on the command line; of
// its plain variables only those that steer nothing here are set.
func TestFrameArgv(t *testing.T) {
	t.Setenv("PATH", os.Getenv("PATH"))
	t.Setenv("MOSAIC_TEST_MODEL", "")
	t.Setenv("ANTHROPIC_MODEL", "")
	t.Setenv("LD_PRELOAD", "")
	f := Frame{Args: []string{"run", "--name", "x", "--", "claude"}, Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-1"},
		Env: map[string]string{"MOSAIC_TEST_MODEL": "m", "ANTHROPIC_MODEL": "m", "PATH": "/evil", "LD_PRELOAD": "/evil.so", "TERM": "xterm"}}
	t.Setenv("TERM", "dumb")
	argv, done, err := f.Argv()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if len(argv) != 8 || argv[2] != "--env-file" || !reflect.DeepEqual(argv[4:], f.Args[1:]) || argv[1] != "run" {
		t.Fatalf("argv %q", argv)
	}
	b, err := os.ReadFile(argv[3])
	if err != nil || string(b) != "ANTHROPIC_API_KEY=\"sk-1\"\n" {
		t.Errorf("the secrets file: %q, %v", b, err)
	}
	if os.Getenv("PATH") == "/evil" || os.Getenv("LD_PRELOAD") != "" || os.Getenv("TERM") != "xterm" || os.Getenv("ANTHROPIC_MODEL") != "m" || os.Getenv("MOSAIC_TEST_MODEL") != "" {
		t.Errorf("PATH %q, LD_PRELOAD %q, TERM %q, ANTHROPIC_MODEL %q, MOSAIC_TEST_MODEL %q: want TERM and ANTHROPIC_MODEL only set", os.Getenv("PATH"), os.Getenv("LD_PRELOAD"), os.Getenv("TERM"), os.Getenv("ANTHROPIC_MODEL"), os.Getenv("MOSAIC_TEST_MODEL"))
	}
	plain, _, _ := Frame{Args: []string{"list"}}.Argv()
	if !reflect.DeepEqual(plain, []string{"mosaic", "list"}) {
		t.Errorf("argv without secrets %q", plain)
	}
}

// A stage asked in another protocol says so in the line the caller reads.
func TestSpeaksProtocol(t *testing.T) {
	var w bytes.Buffer
	if SpeaksProtocol([]string{"1", "stdin"}, 2, &w) || w.String() != VersionMarker+" 1, this mosaic speaks "+Protocol+"\n" {
		t.Errorf("protocol 1: %q", w.String())
	}
	w.Reset()
	if SpeaksProtocol(nil, 1, &w) || w.String() != VersionMarker+" , this mosaic speaks "+Protocol+"\n" {
		t.Errorf("no protocol: %q", w.String())
	}
	if !SpeaksProtocol([]string{Protocol, "stdin"}, 2, &w) || SpeaksProtocol([]string{Protocol}, 2, &w) {
		t.Error("this protocol's stage refused, or one short of its arguments taken")
	}
}
