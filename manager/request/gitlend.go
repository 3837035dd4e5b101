package request

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode"

	"mosaic/credentials"
	"mosaic/internal/credvar"
	"mosaic/internal/errcode"
	"mosaic/sandbox"
	"mosaic/sandbox/egress"
	"mosaic/units"
)

// gitCredentialTimeout bounds the run of the user's git credential helper
// (git credential fill) for one lent repository (a variable for the test).
var gitCredentialTimeout = 10 * time.Second

// gitLendOf reads the request's --lend-git: each repository's credential
// is what the user's git credential helper answers for its URL; the
// token goes to the egress proxy only (as the session's secrets'
// MOSAIC_GIT_ variables, which the start moves into the proxy's file),
// the session's ~/.gitconfig gets a credential helper for exactly that
// URL that answers the user name and a placeholder, and the host joins
// the allowlist.
func gitLendOf(spec *units.Spec, req Request, grant *credentials.Grant) error {
	lends, err := gitLendsAsked(req.LendGit, lendingProfile(req, grant.Profile))
	if err != nil || len(lends) == 0 {
		return err
	}
	what := "--lend-git"
	if len(req.LendGit) == 0 {
		what = "profile " + grant.Profile.Name + "'s LendGit="
	}
	switch {
	case spec.Network != sandbox.NetworkAllow:
		return errcode.BadGitLend.New("%s needs --network allow: the egress proxy puts the token in (network %s has none)", what, spec.Network)
	case req.Scope:
		return errcode.BadGitLend.New("%s is not available with --scope yet", what)
	case spec.Landlock():
		return errcode.BadGitLend.New("%s is not available with --sandbox landlock yet", what)
	}
	users, placeholders, toks := make([]string, len(lends)), make([]string, len(lends)), make([]string, len(lends))
	for i, g := range lends {
		user, token, err := gitCredential(g)
		if err != nil {
			return err
		}
		if err := credentials.ValidateValue(egress.GitTokenVar(i), token, "git credential fill"); err != nil {
			return errcode.NoGitCredential.New("--lend-git %s: the credential helper's password cannot be carried: %w", g.URL(), err)
		}
		if err := credentials.ValidateValue(egress.GitUserVar(i), user, "git credential fill"); err != nil || !plainValue(user) || strings.ContainsAny(user, `'\`) {
			return errcode.NoGitCredential.New("--lend-git %s: the credential helper's user name cannot be written into a config", g.URL())
		}
		users[i], placeholders[i] = user, egress.Placeholder(token)
		for j := range i {
			if toks[j] == token {
				placeholders[i] = placeholders[j] // one token, one placeholder (GH_TOKEN serves each)
			}
		}
		toks[i] = token
		grant.Secrets = append(grant.Secrets, credvar.Var{Name: egress.GitTokenVar(i), Value: token},
			credvar.Var{Name: egress.GitUserVar(i), Value: user}, credvar.Var{Name: egress.GitPlaceholderVar(i), Value: placeholders[i]})
		for _, hp := range g.Hosts() {
			if !contains(spec.Allow, hp) {
				spec.Allow = append(spec.Allow, hp)
			}
		}
		if slices.Contains(g.Ops, "pr") && !slices.Contains(spec.Pass, "GH_TOKEN") {
			// gh's token: the proxy puts the real one into its calls.
			spec.Env = append(spec.Env, "GH_TOKEN="+placeholders[i])
			spec.Pass = append(spec.Pass, "GH_TOKEN")
		}
	}
	spec.GitLends = lends
	spec.GitConfig = gitLendConfig(spec.GitConfig, lends, users, placeholders)
	return nil
}

// lendingProfile is the profile whose lends (LendGit=, LendSSHKey=,
// LendSSHSign=) a session gets: none for a session mosaic runs for itself
// (a clone's finish step, the doctor's probe), whatever profile it runs
// under (a user's own generic.conf may lend).
func lendingProfile(req Request, p credentials.Profile) credentials.Profile {
	if req.Own {
		return credentials.Profile{Name: p.Name}
	}
	return p
}

// gitLendsAsked reads the --lend-git flags, then the profile's LendGit=
// lines: a repository a flag names is lent as the flag says (the flag
// wins, as flags win over a profile's limits); one named twice by flags,
// or twice by the profile, is bad input.
func gitLendsAsked(flags []string, profile credentials.Profile) ([]egress.GitLend, error) {
	var lends []egress.GitLend
	read := func(v, from string, others []egress.GitLend) (egress.GitLend, bool, error) {
		g, err := egress.ParseGitLend(v)
		if err != nil {
			return g, false, errcode.BadGitLend.New("%s%w", from, err)
		}
		for _, o := range others {
			if o.Host == g.Host && o.Repo == g.Repo {
				return g, true, nil
			}
		}
		return g, false, nil
	}
	for _, v := range flags {
		g, twice, err := read(v, "", lends)
		if err != nil {
			return nil, err
		}
		if twice {
			return nil, errcode.BadGitLend.New("--lend-git %s: the repository is lent twice (name its operations once, URL=OP,OP)", g.URL())
		}
		lends = append(lends, g)
	}
	fromFlags := len(lends)
	for _, v := range profile.LendGit {
		from := "profile " + profile.Name + "'s LendGit=: "
		g, twice, err := read(v, from, lends[fromFlags:])
		if err != nil {
			return nil, err
		}
		if twice {
			return nil, errcode.BadGitLend.New("%s%s is lent twice (name its operations once, URL=OP,OP)", from, g.URL())
		}
		if _, byFlag, _ := read(v, from, lends[:fromFlags]); !byFlag {
			lends = append(lends, g)
		}
	}
	return lends, nil
}

// gitCredential asks the user's git credential helpers for g's URL, as
// git would before a push: git credential fill, run from / (no
// repository's config is read), never prompting (GIT_TERMINAL_PROMPT=0, no
// askpass), within gitCredentialTimeout.
func gitCredential(g egress.GitLend) (user, token string, _ error) {
	git, err := exec.LookPath("git")
	if err != nil {
		return "", "", errcode.NoGitCredential.New("--lend-git %s: git is not on PATH to ask your credential helper", g.URL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), gitCredentialTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, git, "-c", "core.askPass=", "credential", "fill")
	cmd.Dir = "/"
	// git and the helpers it starts are a process group of their own (no
	// terminal to read from), killed whole at the timeout; the wait for a
	// helper's child that still holds git's stdout is bounded too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	env := []string{"GIT_TERMINAL_PROMPT=0"}
	for _, kv := range gitEnv(os.Environ()) {
		if !strings.HasPrefix(kv, "SSH_ASKPASS=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	host, _, _ := strings.Cut(strings.TrimPrefix(g.URL(), "https://"), "/")
	cmd.Stdin = strings.NewReader("protocol=https\nhost=" + host + "\npath=" + g.Repo + ".git\n\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctx.Err() != nil {
		return "", "", errcode.NoGitCredential.New("--lend-git %s: your git credential helper did not answer in %s", g.URL(), gitCredentialTimeout)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "username="); ok {
			user = v
		} else if v, ok := strings.CutPrefix(line, "password="); ok {
			token = v
		}
	}
	if err != nil || token == "" {
		why := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(why, '\n'); i >= 0 {
			why = why[i+1:]
		}
		if why == "" {
			why = "no password in its answer"
		}
		return "", "", errcode.NoGitCredential.New("--lend-git %s: your git credential helper has no credential for it (git credential fill: %s)", g.URL(), strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return '?'
			}
			return r
		}, why))
	}
	if user == "" {
		user = "git"
	}
	return user, token, nil
}

// gitLendConfig is the session's ~/.gitconfig with, for each lent
// repository's URL (with and without .git), a credential helper (the only
// one: the empty helper line drops any before it) that answers the user
// name and the placeholder the proxy replaces.
func gitLendConfig(gitConfig string, lends []egress.GitLend, users, placeholders []string) string {
	if gitConfig == "" {
		gitConfig = GitConfigHeader + "# config that sessions get, and the git credentials lent to this session.\n"
	}
	var b strings.Builder
	b.WriteString(gitConfig)
	var hosts []string
	for _, g := range lends {
		if base, _, _ := strings.Cut(strings.TrimPrefix(g.URL(), "https://"), "/"); !slices.Contains(hosts, base) {
			hosts = append(hosts, base)
			// The path matters to the helpers of this host: the session's
			// helper answers for the lent repositories only.
			b.WriteString("[credential " + quoteGitValue("https://"+base) + "]\n\tuseHttpPath = true\n")
		}
	}
	for i, g := range lends {
		answer := "printf 'username=%s\\npassword=%s\\n' '" + users[i] + "' '" + placeholders[i] + "'"
		helper := "!f() { test \"$1\" = get && " + answer + "; }; f"
		for _, u := range []string{g.URL(), g.URL() + ".git"} {
			b.WriteString("[credential " + quoteGitValue(u) + "]\n\thelper =\n\thelper = " + quoteGitValue(helper) + "\n")
		}
		if g.Host == "github.com:443" {
			b.WriteString(anyCaseHelper(g, answer))
		}
	}
	return b.String()
}

// anyCaseHelper is a helper for the lent GitHub repository g spelled in
// any case (git matches a credential section's path exactly, GitHub
// names repositories without case: a remote of github.com/Owner/Repo is a
// lent owner/repo, and the proxy takes it as such): added to the host's
// helpers, it reads the path git asks about and runs answer when it is
// g's in any case, with or without .git. The exact spelling's own section
// drops it (its empty helper line), and another path gets no answer.
func anyCaseHelper(g egress.GitLend, answer string) string {
	var glob strings.Builder
	for _, r := range g.Repo {
		if lo, up := unicode.ToLower(r), unicode.ToUpper(r); lo != up {
			glob.WriteString("[" + string(lo) + string(up) + "]")
		} else {
			glob.WriteRune(r) // a digit, '-', '.', '_' or '/': no glob meaning
		}
	}
	helper := "!f() { test \"$1\" = get || return 0; p=; while read -r l; do case \"$l\" in path=*) p=\"${l#path=}\";; esac; done; " +
		"case \"$p\" in " + glob.String() + "|" + glob.String() + ".git) " + answer + ";; esac; }; f"
	return "[credential \"https://github.com\"]\n\thelper = " + quoteGitValue(helper) + "\n"
}
