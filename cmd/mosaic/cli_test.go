package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Flags may follow a command's NAMEs, as with git and systemctl; never
// what follows -- or a session's COMMAND.
func TestReorderArgs(t *testing.T) {
	app := newApp(&output{})
	for _, tc := range []struct{ in, want string }{
		{"mosaic status fix-42 --json", "mosaic status --json fix-42"},
		{"mosaic stop fix-42 --timeout 2s", "mosaic stop --timeout 2s fix-42"},
		{"mosaic stop fix-42 --timeout=2s --json", "mosaic stop --timeout=2s --json fix-42"},
		{"mosaic logs fix-42 -f -n 5", "mosaic logs -f -n 5 fix-42"},
		{"mosaic rm x --json", "mosaic rm --json x"},
		{"mosaic bus status x --json", "mosaic bus status --json x"},
		{"mosaic run -- sh -c --json", "mosaic run -- sh -c --json"},
		{"mosaic start --name a -- ls -la", "mosaic start --name a -- ls -la"},
		{"mosaic start ls -la", "mosaic start ls -la"},
		{"mosaic status a -- --json", "mosaic status a -- --json"},
	} {
		got := strings.Join(reorderArgs(app, strings.Fields(tc.in)), " ")
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestSuggestions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mosaic", "statsu"}, "did you mean status?"},
		{[]string{"mosaic", "start", "--nmae", "x", "--", "true"}, "did you mean --name?"},
		{[]string{"mosaic", "stop", "x", "--timeot", "3"}, "did you mean --timeout?"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line with %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"mosaic", "--version"}, {"mosaic", "version"}, {"mosaic", "help"}, {"mosaic", "help", "start"}, {"mosaic", "stop", "--help"},
		{"mosaic", "login", "--help"}, {"mosaic", "login", "-h"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 0 || stdout.Len() == 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
		if strings.Contains(stdout.String()+stderr.String(), "mosaic mosaic") {
			t.Errorf("%v: %q", args, stdout.String())
		}
	}
}

// A flag's placeholder is a word in capitals (`DIR`, `MODE`), never a
// phrase a usage text quotes, as urfave/cli takes the first backquoted
// text for it (issue 30: --sandbox showed "mosaic doctor").
func TestFlagPlaceholders(t *testing.T) {
	app := newApp(&output{})
	var walk func(cmds []*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, c := range cmds {
			for _, f := range c.Flags {
				df, ok := f.(cli.DocGenerationFlag)
				if !ok {
					continue
				}
				name := "" // as urfave/cli's unquoteUsage reads it
				if _, rest, ok := strings.Cut(df.GetUsage(), "`"); ok {
					name, _, _ = strings.Cut(rest, "`")
				}
				if strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_=[]:.@-") != "" {
					t.Errorf("mosaic %s --%s: placeholder %q", c.Name, f.Names()[0], name)
				}
			}
			walk(c.Subcommands)
		}
	}
	walk(app.Commands)
}

func TestCompletionWords(t *testing.T) {
	app := newApp(&output{})
	has := func(words []string, w string) bool {
		for _, x := range words {
			if x == w {
				return true
			}
		}
		return false
	}
	if w := completions(app, nil); !has(w, "start") || !has(w, "status") || has(w, "__complete") {
		t.Errorf("verbs: %v", w)
	}
	if w := completions(app, []string{"bus"}); !has(w, "launch") {
		t.Errorf("bus verbs: %v", w)
	}
	if w := completions(app, []string{"start"}); !has(w, "--name") || !has(w, "--memory-max") {
		t.Errorf("start flags: %v", w)
	}
	if w := completions(app, []string{"start", "--profile"}); !has(w, "claude-code") || !has(w, "generic") {
		t.Errorf("profiles: %v", w)
	}
	if w := completions(app, []string{"run", "--", "ls"}); len(w) != 0 {
		t.Errorf("after --: %v", w)
	}
}

// TestEveryCommandHasJSON: every command a user types takes --json (login
// passes its flags to run, which does); a bare group (bus) has none of its
// own, its verbs do.
func TestEveryCommandHasJSON(t *testing.T) {
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := strings.TrimSpace(prefix + " " + c.Name)
			if c.Hidden && c.Name != "man" || c.Name == "help" { // __complete, bus prepare: mosaic's own
				continue
			}
			if len(c.Subcommands) > 0 {
				walk(name, c.Subcommands)
				continue
			}
			if c.SkipFlagParsing && c.Name == "login" {
				continue
			}
			has := false
			for _, f := range c.Flags {
				for _, n := range f.Names() {
					has = has || n == "json"
				}
			}
			if !has {
				t.Errorf("mosaic %s has no --json", name)
			}
		}
	}
	walk("", newApp(&output{}).Commands)
	var b bytes.Buffer
	if code := run([]string{"mosaic", "completion", "bash", "--json"}, &b, &b); code != 0 || !strings.Contains(b.String(), `"script"`) {
		t.Errorf("completion --json: %d %s", code, b.String())
	}
}

// mosaic profiles NAME shows that one; a bad profile file is named and the
// others are still listed (issue 30).
func TestProfilesCommand(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	os.MkdirAll(filepath.Join(cfg, "mosaic", "profiles"), 0o700)
	os.WriteFile(filepath.Join(cfg, "mosaic", "profiles", "broken.conf"), []byte("[Profile]\nNoSuchSetting=1\n"), 0o600)
	os.WriteFile(filepath.Join(cfg, "mosaic", "profiles", "mine.conf"), []byte("[Profile]\nBinary=mine\nToolchain=~/.local/share/zig\n"), 0o600)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"mosaic", "profiles"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "claude-code") ||
		!strings.Contains(stdout.String(), "mine") || !strings.Contains(stderr.String(), "broken.conf") {
		t.Errorf("profiles: exit %d\nstdout %s\nstderr %s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"mosaic", "profiles", "claude-code"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "platform.claude.com") ||
		strings.Contains(stdout.String(), "codex") {
		t.Errorf("profiles claude-code: exit %d\nstdout %s\nstderr %s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := run([]string{"mosaic", "profiles", "--json", "mine"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), `"toolchains"`) {
		t.Errorf("profiles --json mine: exit %d\nstdout %s", code, stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"mosaic", "profiles", "broken"}, &stdout, &stderr); code != 2 {
		t.Errorf("profiles broken: exit %d, want 2 (bad-profile)", code)
	}
}
