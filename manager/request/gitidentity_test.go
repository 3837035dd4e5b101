package request

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Only the identity and the harmless settings of the system and global
// scopes reach a session's ~/.gitconfig (issue 30).
func TestGitConfigFor(t *testing.T) {
	rec := func(scope, key, value string) string { return scope + "\x00" + key + "\n" + value + "\x00" }
	out := rec("system", "init.defaultbranch", "main") +
		rec("global", "user.name", `Ann "the dev" \ O'Hara`) +
		rec("global", "user.email", "ann@example.com") +
		rec("global", "credential.helper", "store") +
		rec("global", "include.path", "~/.gitconfig-work") +
		rec("global", "alias.st", "!sh -c evil") +
		rec("global", "url.git@github.com:.insteadof", "https://github.com/") +
		rec("global", "core.sshcommand", "ssh -i ~/.ssh/key") +
		rec("global", "init.defaultbranch", "trunk") +
		rec("local", "user.email", "repo@example.com") +
		rec("command", "user.name", "from GIT_CONFIG_PARAMETERS") +
		rec("global", "pull.rebase", "true\n[core]\n\tfsmonitor = evil")
	got := gitConfigFor([]byte(out))
	want := `[init]
	defaultbranch = "trunk"
[user]
	email = "ann@example.com"
	name = "Ann \"the dev\" \\ O'Hara"
`
	if !strings.HasSuffix(got, want) || strings.Count(got, "[") != 2 {
		t.Errorf("got\n%s\nwant it to end with\n%s", got, want)
	}
	for _, bad := range []string{"credential", "include", "alias", "insteadof", "ssh", "repo@", "GIT_CONFIG", "fsmonitor", "rebase"} {
		if strings.Contains(got, bad) {
			t.Errorf("%q reached the session's gitconfig:\n%s", bad, got)
		}
	}
	if gitConfigFor(nil) != "" {
		t.Error("no settings: a gitconfig anyway")
	}
	// git reads back what was written, byte for byte.
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	f := filepath.Join(t.TempDir(), "gitconfig")
	os.WriteFile(f, []byte(got), 0o600)
	b, err := exec.Command(git, "config", "--file", f, "user.name").Output()
	if err != nil || strings.TrimSuffix(string(b), "\n") != `Ann "the dev" \ O'Hara` {
		t.Errorf("git reads user.name back as %q (%v)", b, err)
	}
}

// The user's own git is asked, from /, with includes followed and no
// GIT_CONFIG_* of the caller's.
func TestReadUserGitConfig(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = Ann\n[credential]\n\thelper = store\n[include]\n\tpath = more\n"), 0o600)
	os.WriteFile(filepath.Join(home, "more"), []byte("[user]\n\temail = ann@example.com\n"), 0o600)
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_COUNT", "1")
	t.Setenv("GIT_CONFIG_KEY_0", "user.name")
	t.Setenv("GIT_CONFIG_VALUE_0", "Mallory")
	got := gitConfigFor(readUserGitConfig("").out)
	if !strings.Contains(got, `name = "Ann"`) || !strings.Contains(got, `email = "ann@example.com"`) || strings.Contains(got, "Mallory") || strings.Contains(got, "helper") {
		t.Errorf("got\n%s", got)
	}
}
