package request

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mosaic/credentials"
	"mosaic/internal/errcode"
	"mosaic/sandbox"
	"mosaic/sandbox/egress"
	"mosaic/units"
)

// TestGitCredentialTimeout: a credential helper that does not answer
// (one waiting for a person, a hung keyring) is a refusal within the
// timeout, even though the helper's own child holds git's output open
// after git is killed (without WaitDelay this waited the helper's 30 s).
func TestGitCredentialTimeout(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[credential]\n\thelper = \"!f() { sleep 30; }; f\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	defer func(d time.Duration) { gitCredentialTimeout = d }(gitCredentialTimeout)
	gitCredentialTimeout = 300 * time.Millisecond
	start := time.Now()
	g, _ := egress.ParseGitLend("https://git.example/me/repo")
	_, _, err := gitCredential(g)
	if !errors.Is(err, errcode.NoGitCredential.Target()) || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
}

// TestGitLendOf: the token is the user's credential helper's answer for
// the URL and goes to the secrets only (as MOSAIC_GIT_ variables); the
// session's gitconfig answers the placeholder for exactly the lent URL
// (git itself asked, inside a home holding only that config); a session
// without an egress proxy, a URL it cannot read and one the helper knows
// nothing of are refused with their codes.
func TestGitLendOf(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	home := t.TempDir()
	store := filepath.Join(home, "store")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(store, []byte("https://me:s3cret-token@git.example:8443\n"), 0o600))
	must(os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[credential]\n\thelper = store --file="+store+"\n"), 0o600))
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))

	spec := &units.Spec{Network: sandbox.NetworkAllow}
	var grant credentials.Grant
	must(gitLendOf(spec, Request{LendGit: []string{"https://git.example:8443/me/repo.git"}}, &grant))
	vals := map[string]string{}
	for _, v := range grant.Secrets {
		vals[v.Name] = v.Value
	}
	ph := vals[egress.GitPlaceholderVar(0)]
	if vals[egress.GitTokenVar(0)] != "s3cret-token" || vals[egress.GitUserVar(0)] != "me" || len(ph) < 32 {
		t.Fatalf("the secrets: %v", grant.Secrets)
	}
	if strings.Contains(spec.GitConfig, "s3cret") || !strings.Contains(spec.GitConfig, ph) || !contains(spec.Allow, "git.example:8443") {
		t.Fatalf("the spec: allow %v, gitconfig\n%s", spec.Allow, spec.GitConfig)
	}
	inside := t.TempDir()
	must(os.WriteFile(filepath.Join(inside, ".gitconfig"), []byte(spec.GitConfig), 0o600))
	fill := func(url string) string {
		cmd := exec.Command("git", "-c", "core.askPass=", "credential", "fill")
		cmd.Dir = "/"
		cmd.Env = []string{"HOME=" + inside, "GIT_TERMINAL_PROMPT=0", "PATH=" + os.Getenv("PATH")}
		cmd.Stdin = strings.NewReader("url=" + url + "\n\n")
		out, _ := cmd.Output()
		return string(out)
	}
	for _, u := range []string{"https://git.example:8443/me/repo.git", "https://git.example:8443/me/repo"} {
		if got := fill(u); !strings.Contains(got, "username=me\npassword="+ph+"\n") {
			t.Errorf("%s: the session's git gets %q", u, got)
		}
	}
	for _, u := range []string{"https://git.example:8443/me/other.git", "https://git.example:8443/me/repo-x.git", "https://git.example/me/repo.git"} {
		if got := fill(u); strings.Contains(got, "password=") {
			t.Errorf("%s: the session's git gets a password: %q", u, got)
		}
	}

	for _, c := range []struct {
		spec units.Spec
		req  Request
		code errcode.Code
	}{
		{units.Spec{Network: sandbox.NetworkNone}, Request{LendGit: []string{"https://git.example:8443/me/repo"}}, errcode.BadGitLend},
		{units.Spec{Network: sandbox.NetworkHost}, Request{LendGit: []string{"https://git.example:8443/me/repo"}}, errcode.BadGitLend},
		{units.Spec{Network: sandbox.NetworkAllow}, Request{Scope: true, LendGit: []string{"https://git.example:8443/me/repo"}}, errcode.BadGitLend},
		{units.Spec{Network: sandbox.NetworkAllow, Sandbox: sandbox.ModeLandlock}, Request{LendGit: []string{"https://git.example:8443/me/repo"}}, errcode.BadGitLend},
		{units.Spec{Network: sandbox.NetworkAllow}, Request{LendGit: []string{"https://git.example:8443/me/repo", "https://git.example:8443/me/repo.git=fetch"}}, errcode.BadGitLend},
		{units.Spec{Network: sandbox.NetworkAllow}, Request{LendGit: []string{"ssh://git.example/me/repo"}}, errcode.BadGitLend},
		{units.Spec{Network: sandbox.NetworkAllow}, Request{LendGit: []string{"https://unknown.example/me/repo"}}, errcode.NoGitCredential},
	} {
		var g credentials.Grant
		err := gitLendOf(&c.spec, c.req, &g)
		if !errors.Is(err, c.code.Target()) {
			t.Errorf("%v %+v: %v, want %s", c.req.LendGit, c.spec.Network, err, c.code.Name)
		}
		if len(g.Secrets) > 0 || err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%v: secrets %d, error %v", c.req.LendGit, len(g.Secrets), err)
		}
	}
}

// TestGitLendsAsked: a profile's LendGit= lines are lent beside the
// --lend-git flags; a flag naming the same repository wins (its
// operations, not the profile's); a repository twice in the flags or
// twice in the profile, or a LendGit= that does not read as --lend-git,
// is bad-git-lend naming where it came from; a session of a profile that
// lends, without an egress proxy, is refused naming the profile.
func TestGitLendsAsked(t *testing.T) {
	p := credentials.Profile{Name: "mine", LendGit: []string{"https://git.example/me/a=fetch", "https://git.example/me/b"}}
	got, err := gitLendsAsked([]string{"https://git.example/me/a.git=fetch,push,force"}, p)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, g := range got {
		s = append(s, g.String())
	}
	if strings.Join(s, " ") != "https://git.example/me/a=fetch,push,force https://git.example/me/b=fetch,push" {
		t.Errorf("lent %v", s)
	}
	for _, c := range []struct {
		flags, profile []string
		want           string
	}{
		{[]string{"https://git.example/me/a", "https://git.example/me/a=fetch"}, nil, "lent twice"},
		{nil, []string{"https://git.example/me/a", "https://git.example/me/a.git=fetch"}, "profile mine's LendGit=: https://git.example/me/a is lent twice"},
		{nil, []string{"https://git.example/me"}, "profile mine's LendGit=: --lend-git \"https://git.example/me\": name one repository"},
		{nil, []string{"https://git.example/me/a=delete"}, "profile mine's LendGit="},
	} {
		_, err := gitLendsAsked(c.flags, credentials.Profile{Name: "mine", LendGit: c.profile})
		if !errors.Is(err, errcode.BadGitLend.Target()) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: %v, want bad-git-lend with %q", c.flags, c.profile, err, c.want)
		}
	}
	grant := credentials.Grant{Profile: p}
	err = gitLendOf(&units.Spec{Network: sandbox.NetworkNone}, Request{}, &grant)
	if !errors.Is(err, errcode.BadGitLend.Target()) || !strings.Contains(err.Error(), "profile mine's LendGit= needs --network allow") {
		t.Errorf("network none: %v", err)
	}
	if len(grant.Secrets) != 0 {
		t.Errorf("secrets: %v", grant.Secrets)
	}
}

// TestOwnSessionsBorrowNothing: a session mosaic runs for itself (a
// clone's finish step under network none, the doctor's probe) gets none of
// its profile's lends, which a user's own generic.conf may name: the
// finish step would otherwise be refused (bad-git-lend under network
// none) or lent the user's credentials (checked: without lendingProfile
// this test failed with bad-git-lend).
func TestOwnSessionsBorrowNothing(t *testing.T) {
	p := credentials.Profile{Name: "generic", LendGit: []string{"https://git.example/me/a"}, LendSSHSign: "SHA256:s"}
	grant := credentials.Grant{Profile: p}
	spec := &units.Spec{Network: sandbox.NetworkNone}
	if err := gitLendOf(spec, Request{Own: true}, &grant); err != nil || len(spec.GitLends) != 0 {
		t.Errorf("an own session: %v, lent %v", err, spec.GitLends)
	}
	if got := sshLendsAsked(Request{Own: true}, lendingProfile(Request{Own: true}, p)); len(got.LendSSHSign) != 0 {
		t.Errorf("an own session is lent %v", got.LendSSHSign)
	}
	if err := gitLendOf(spec, Request{}, &grant); !errors.Is(err, errcode.BadGitLend.Target()) {
		t.Errorf("a user's session of the same profile under network none: %v", err)
	}
}

// TestGitLendConfigAnyCase: the session's git, with the config a lend of
// github.com/me/repo writes, answers the placeholder for that repository
// spelled in any case (GitHub's names have none: a remote of
// github.com/Me/Repo is the lent repository, and the proxy takes it as
// such), and for no other repository of GitHub or spelling on another
// host (whose server may keep Me/Repo apart). Before the fix git asked for
// a user name for github.com/Me/Repo (its credential sections match a
// path exactly): checked against that build.
func TestGitLendConfigAnyCase(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	var lends []egress.GitLend
	for _, u := range []string{"https://github.com/me/re-po.x=fetch,push", "https://git.test/me/repo"} {
		g, err := egress.ParseGitLend(u)
		if err != nil {
			t.Fatal(err)
		}
		lends = append(lends, g)
	}
	cfg := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(cfg, []byte(gitLendConfig("", lends, []string{"me", "git"}, []string{"PLACEHOLDER-GH", "PLACEHOLDER-TEST"})), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ url, want string }{
		{"https://github.com/me/re-po.x", "PLACEHOLDER-GH"},
		{"https://github.com/me/re-po.x.git", "PLACEHOLDER-GH"},
		{"https://github.com/Me/Re-Po.X", "PLACEHOLDER-GH"},
		{"https://GitHub.com/ME/RE-PO.X.git", "PLACEHOLDER-GH"},
		{"https://github.com/Me/Re-Po.Xy", ""},
		{"https://github.com/Me/Re-Po", ""},
		{"https://github.com/Other/Re-Po.X", ""},
		{"https://git.test/me/repo.git", "PLACEHOLDER-TEST"},
		{"https://git.test/Me/Repo.git", ""},
	} {
		cmd := exec.Command("git", "credential", "fill")
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL="+cfg, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=")
		cmd.Stdin = strings.NewReader("url=" + c.url + "\n\n")
		out, _ := cmd.Output()
		got := ""
		for _, l := range strings.Split(string(out), "\n") {
			if p, ok := strings.CutPrefix(l, "password="); ok {
				got = p
			}
		}
		if got != c.want {
			t.Errorf("git credential fill for %s: password %q, want %q (git said %q)", c.url, got, c.want, out)
		}
	}
}
