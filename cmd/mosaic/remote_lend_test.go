package main

import (
	"slices"
	"strings"
	"testing"

	"mosaic/internal/errcode"
)

// TestHostArgsLendGit: --lend-git travels to the remote's mosaic as it is
// (the remote's own credential helper answers there), in either spelling;
// one that does not read is bad-git-lend before ssh runs; an argument of
// the command after -- is the command's; --lend-ssh-* stay refused with
// --host (bad-ssh-lend), unchanged.
func TestHostArgsLendGit(t *testing.T) {
	env := func(string) string { return "" }
	for _, c := range []struct {
		args []string
		code string
	}{
		{[]string{"--host", "h", "run", "--lend-git", "https://git.example/me/repo=fetch", "--", "true"}, ""},
		{[]string{"-H", "h", "start", "--lend-git=https://git.example/me/repo", "--", "true"}, ""},
		{[]string{"--host", "h", "run", "--", "echo", "--lend-git", "not-a-url"}, ""},
		{[]string{"--host", "h", "run", "--lend-git", "git@git.example:me/repo.git", "--", "true"}, "bad-git-lend"},
		{[]string{"--host", "h", "start", "--lend-git=https://git.example/me/repo=delete", "--", "true"}, "bad-git-lend"},
		{[]string{"--host", "h", "run", "--lend-ssh-sign", "SHA256:x", "--", "true"}, "bad-ssh-lend"},
	} {
		call, err := hostArgs(c.args, env)
		if c.code != "" {
			if e := errcode.Of(err); err == nil || e.Code != c.code || e.Exit != errcode.ExitBadInput {
				t.Errorf("%v: %v, want %s (exit 2)", c.args, err, c.code)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if len(call.targets) != 1 || !slices.Equal(call.args, c.args[2:]) {
			t.Errorf("%v: targets %v, args %v: the command line does not travel whole", c.args, call.targets, call.args)
		}
	}
	if got := strings.Join(gitLendArgs([]string{"run", "--lend-git", "a", "--lend-git=b", "-lend-git", "c", "--", "--lend-git", "d"}), " "); got != "a b c" {
		t.Errorf("gitLendArgs = %q", got)
	}
}
