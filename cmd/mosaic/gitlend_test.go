package main

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// gitServer is a real git server over HTTPS on the rig's test network:
// git http-backend (CGI, run by net/http/cgi in the test) behind a TLS
// server named mockhost.mosaic.test, basic auth required.
type gitServer struct {
	root, base string // the repositories' directory; https://mockhost.mosaic.test:PORT
	mu         sync.Mutex
	auths      []string // every Authorization's password part, as it came
	granted    []string // the path of every request the token authorized
	leaks      []string // a header, other than Authorization, that held the token
}

func startGitServer(t *testing.T, n string, cert tls.Certificate, user, token string) *gitServer {
	t.Helper()
	return startGitServerAt(t, n+".1:0", "https://mockhost.mosaic.test", false, cert, user, token)
}

// startGitServerAt is startGitServer listening on addr, named base (its
// port added when addr has none), and, with fold, taking paths without
// case as GitHub does (the repositories are lower case).
func startGitServerAt(t *testing.T, addr, base string, fold bool, cert tls.Certificate, user, token string) *gitServer {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("needs git")
	}
	s := &gitServer{root: t.TempDir()}
	for _, repo := range []string{"me/repo.git", "me/other.git"} {
		gitOn(t, "", "init", "-q", "--bare", "-b", "main", filepath.Join(s.root, repo))
		gitOn(t, filepath.Join(s.root, repo), "config", "http.receivepack", "true")
	}
	backend := &cgi.Handler{Path: git, Args: []string{"http-backend"}, Dir: s.root,
		Env: []string{"GIT_PROJECT_ROOT=" + s.root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=" + user}}
	l, err := tls.Listen("tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	s.base = base
	if _, port, _ := net.SplitHostPort(addr); port == "0" {
		_, port, _ = net.SplitHostPort(l.Addr().String())
		s.base += ":" + port
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if h := r.Header.Get("Authorization"); h != "" {
			s.mu.Lock()
			s.auths = append(s.auths, p)
			s.mu.Unlock()
		}
		for name, vs := range r.Header {
			if name != "Authorization" && strings.Contains(strings.Join(vs, " "), token) {
				s.mu.Lock()
				s.leaks = append(s.leaks, name)
				s.mu.Unlock()
			}
		}
		if !ok || u != user || p != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		s.mu.Lock()
		s.granted = append(s.granted, r.URL.EscapedPath())
		s.mu.Unlock()
		if fold {
			r.URL.Path, r.URL.RawPath = strings.ToLower(r.URL.Path), ""
		}
		backend.ServeHTTP(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return s
}

// gitOn runs git in dir with extra environment and returns its output.
func gitOn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return gitEnvOn(t, dir, nil, args...)
}

func gitEnvOn(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t",
		"GIT_TERMINAL_PROMPT=0"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitLendScript runs inside the session: it clones the lent repository,
// pushes a new branch, a fast-forward, a force-push, a deletion and a push
// to another repository of the same host (with the placeholder its git
// credential helper answers), printing each outcome; then,
// as a prompt-injected agent would, looks for the token (given in two
// halves, so that its own command line does not hold it) in its
// environment, its files and every /proc/*/environ and cmdline.
const gitLendScript = `
url=$1 other=$2 half1=$3 half2=$4
token="$half1$half2"
try() { name=$1; shift; if "$@" >/tmp/out.$name 2>&1; then echo "$name=ok"; else echo "$name=refused"; cat /tmp/out.$name; fi; }
git clone -q "$url" /tmp/r || echo clone=failed
cd /tmp/r || exit 1
git config user.email t@t; git config user.name t
git checkout -q -b feature
echo a >f; git add f; git commit -qm a
try new-branch git push -q origin feature
echo b >>f; git commit -qam b
try fast-forward git push -q origin feature
git reset -q --hard HEAD~1; echo c >>f; git commit -qam c
try force-push git push -q -f origin feature
try delete git push -q origin :feature
# The session's helper answers for the lent URL only: an agent that
# takes its placeholder to another repository sends it in the URL.
ph=$(printf 'url=%s\n\n' "$url" | git credential fill | sed -n 's/^password=//p')
try other-repo git push -q "${other/https:\/\//https://me:$ph@}" feature
found=
env | grep -qF -- "$token" && found="$found env"
grep -rqsF -- "$token" "$HOME" /tmp "$PWD" /run/mosaic 2>/dev/null && found="$found files"
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\0' '\n' <"$f" 2>/dev/null | grep -qF -- "$token" && found="$found $f"; done
echo "token-found:${found:-nowhere}"
`

// TestLendGit (issue 42, HTTPS): a session lent one repository of a real
// git server (git http-backend over HTTPS, basic auth) pushes a new
// branch and a fast-forward through its egress proxy, which puts in the
// token the user's credential helper gave; a force-push, a deletion and
// a push to another repository of the same host are refused; the token is
// nowhere the session can look, and the server never saw the placeholder
// succeed. Each refusal is first shown to succeed unfiltered: the same
// force-push, deletion and push to the other repository from the host with
// the real token (the server itself refuses none of them). Checked against
// a weakened proxy too (checkPush skipped, any path of the host taken for
// the lent repository): force-push, delete and other-repo were then ok and
// the test failed on each.
func TestLendGit(t *testing.T) {
	n := needTestNet(t)
	caPEM, cert := testCA(t, "mockhost.mosaic.test")
	dir := t.TempDir()
	roots := filepath.Join(dir, "roots.pem")
	must(t, os.WriteFile(roots, caPEM, 0o644))
	token := "ghp_" + strings.Repeat(randomHex(), 5)
	srv := startGitServer(t, n, cert, "me", token)
	url, other := srv.base+"/me/repo.git", srv.base+"/me/other.git"
	// The user's own credential helper (git's store) knows the token.
	hostEnv := credentialStore(t, dir, srv.base, token, roots)

	// Unfiltered, from the host with the real token: the server takes a
	// force-push, a deletion and a push to the other repository.
	work := t.TempDir()
	gitEnvOn(t, work, hostEnv, "clone", "-q", url, "c")
	c := filepath.Join(work, "c")
	must(t, os.WriteFile(filepath.Join(c, "f"), []byte("x\n"), 0o644))
	gitOn(t, c, "add", "f")
	gitOn(t, c, "commit", "-qm", "x")
	gitEnvOn(t, c, hostEnv, "push", "-q", "origin", "HEAD:main", "HEAD:control")
	gitOn(t, c, "commit", "-q", "--amend", "-m", "y")
	gitEnvOn(t, c, hostEnv, "push", "-q", "-f", "origin", "HEAD:control")
	gitEnvOn(t, c, hostEnv, "push", "-q", "origin", ":control")
	gitEnvOn(t, c, hostEnv, "push", "-q", other, "HEAD:control")

	name := sessionName(t)
	env := append(hostEnv, "MOSAIC_EGRESS_TEST_ROOTS="+roots)
	r := mosaicWith(t, env, "", "run", "--name", name, "--network", "allow", "--allow-host", n+".0/24", "-w", workspace(t),
		"--lend-git", url, "--", "bash", "-c", gitLendScript, "bash", url, other, token[:10], token[10:])
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("the session:\n%s%s", r.stdout, r.stderr)
	for _, want := range []string{"new-branch=ok", "fast-forward=ok", "force-push=refused", "delete=refused", "other-repo=refused", "token-found:nowhere"} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("want %s in:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "times: beyond the git credential lent (--lend-git); ") {
		t.Errorf("the run's refusal lines do not say what was refused:\n%s", r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, token) {
		t.Error("the token is in mosaic's output")
	}
	// The branch is on the server at the fast-forward, not the force-push.
	if got := gitOn(t, filepath.Join(srv.root, "me/repo.git"), "log", "--format=%s", "feature"); got != "b\na\nx" {
		t.Errorf("the server's feature branch: %q", got)
	}
	srv.mu.Lock()
	for _, p := range srv.auths {
		if p != token && p != "" {
			t.Errorf("the server got a password that is not the token (the placeholder?): %.12q", p)
		}
	}
	srv.mu.Unlock()
	if st := mosaic(t, "status", name).stdout; !strings.Contains(st, "git lent:  "+strings.TrimSuffix(url, ".git")+" for fetch, push") {
		t.Errorf("status does not say what was lent:\n%s", st)
	}
	au := mosaic(t, "audit", name).stdout
	t.Logf("mosaic audit:\n%s", au)
	for _, want := range []string{"git-lend-allowed", "git-lend-refused", "deletes refs/heads/feature", "not a fast-forward", "not a repository lent"} {
		if !strings.Contains(au, want) {
			t.Errorf("want %q in mosaic audit:\n%s", want, au)
		}
	}
	egressID := "mosaic-" + name + "-egress"
	var journal string
	eventually(t, 10*time.Second, "the token put into a push in the egress journal", func() bool {
		b, _ := exec.Command("journalctl", "--user", "-t", egressID, "-o", "verbose", "--no-pager").Output()
		journal = string(b)
		return strings.Contains(journal, "injected git token for "+strings.TrimSuffix(url, ".git")+": POST ")
	})
	show, _ := exec.Command("systemctl", "--user", "show", "--all", "mosaic-"+name+".service", egressID+".service").Output()
	all, _ := exec.Command("journalctl", "--user", "-o", "verbose", "--no-pager").Output()
	for what, s := range map[string]string{"the audit": au, "the egress journal": journal, "the journal": string(all), "systemctl show": string(show)} {
		if strings.Contains(s, token) {
			t.Errorf("%s holds the token", what)
		}
	}
}

// TestLendGitBadInput: --lend-git without an egress proxy (network none or
// host, a scope, landlock), with a URL it
// does not read, and for a URL the credential helper has no answer for:
// one line, exit 2 or 3, nothing started.
func TestLendGitBadInput(t *testing.T) {
	needRig(t)
	cfg := t.TempDir()
	env := []string{"XDG_CONFIG_HOME=" + cfg}
	ws := workspace(t)
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--network", "none", "--lend-git", "https://git.example/me/repo"}, 2, "bad-git-lend"},
		{[]string{"--network", "host", "--lend-git", "https://git.example/me/repo"}, 2, "bad-git-lend"},
		{[]string{"--network", "allow", "--scope", "--direct", "--lend-git", "https://git.example/me/repo"}, 2, "bad-git-lend"},
		{[]string{"--network", "allow", "--sandbox", "landlock", "--lend-git", "https://git.example/me/repo"}, 2, "bad-git-lend"},
		{[]string{"--network", "allow", "--lend-git", "git@git.example:me/repo.git"}, 2, "bad-git-lend"},
		{[]string{"--network", "allow", "--lend-git", "https://git.example/me/repo=delete"}, 2, "bad-git-lend"},
		{[]string{"--network", "allow", "--lend-git", "https://git.example/me/repo"}, 3, "no-git-credential"},
	} {
		name := sessionName(t)
		r := mosaicWith(t, env, "", append(append([]string{"run", "--json", "--name", name, "-w", ws}, c.args...), "--", "true")...)
		if r.code != c.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", c.args, r.code, c.code, r.stdout, r.stderr)
			continue
		}
		if code, _ := jsonError(t, r); code != c.err {
			t.Errorf("%v: %s, want %s", c.args, code, c.err)
		}
		if mosaic(t, "status", name).code == 0 {
			t.Errorf("%v: session %s exists", c.args, name)
		}
	}
}

// credentialStore makes, in dir, the user's own git configuration whose
// credential helper (git's store) answers token as "me" for base, and
// returns the environment a host git reads it with (roots: the server's CA).
func credentialStore(t *testing.T, dir, base, token, roots string) []string {
	t.Helper()
	cfg := filepath.Join(dir, "config")
	must(t, os.MkdirAll(filepath.Join(cfg, "git"), 0o700))
	store := filepath.Join(dir, "store")
	must(t, os.WriteFile(store, []byte("https://me:"+token+"@"+strings.TrimPrefix(base, "https://")+"\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(cfg, "git", "config"), []byte("[credential]\n\thelper = store --file="+store+"\n"), 0o600))
	return []string{"XDG_CONFIG_HOME=" + cfg, "GIT_SSL_CAINFO=" + roots}
}

// TestLendGitGitHubCase (issue 42): a session lent github.com/me/repo
// clones and pushes a new branch through the remote
// https://github.com/Me/Repo.git (GitHub names repositories without case;
// the test's git server on github.com's name takes paths as GitHub
// does), with the token put in; a push to Me/Other is still refused. Before
// the fix the clone was refused by the proxy ("not a repository lent to
// the session on this host"); with the proxy's fix alone, the session's
// git had no placeholder for that spelling ("could not read Username"):
// both checked against those builds.
func TestLendGitGitHubCase(t *testing.T) {
	n := needTestNet(t)
	token := "ghp_" + strings.Repeat(randomHex(), 4)
	caPEM, cert := testCAFor(t, "github.com")
	s := startGitServerAt(t, net.JoinHostPort(n+".1", registryTLSPort), "https://github.com", true, cert, "me", token)
	dir := t.TempDir()
	roots := filepath.Join(dir, "roots.pem")
	must(t, os.WriteFile(roots, caPEM, 0o644))
	env := append(credentialStore(t, dir, "https://github.com", token, roots), "MOSAIC_EGRESS_TEST_ROOTS="+roots)
	script := `try() { name=$1; shift; if "$@" >/tmp/out.$name 2>&1; then echo "$name=ok"; else echo "$name=refused"; cat /tmp/out.$name; fi; }
try clone git clone -q https://github.com/Me/Repo.git /tmp/r
cd /tmp/r || exit 1
git config user.email t@t; git config user.name t
git checkout -q -b feature; echo a >f; git add f; git commit -qm a
try push git push -q origin feature
try other-repo git push -q https://github.com/Me/Other.git feature
`
	cmd := exec.Command(mosaicBin, "run", "--name", sessionName(t), "--network", "allow", "--allow-host", n+".0/24", "-w", workspace(t),
		"--lend-git", "https://github.com/me/repo", "--", "bash", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	r := runResult(t, cmd)
	for _, want := range []string{"clone=ok", "push=ok", "other-repo=refused"} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("want %s in:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	s.mu.Lock()
	granted := s.granted
	s.mu.Unlock()
	if got := gitOn(t, filepath.Join(s.root, "me/repo.git"), "for-each-ref", "--format=%(refname)", "refs/heads/feature"); got != "refs/heads/feature" {
		t.Errorf("the lent repository has no branch feature (%q); the server authorized %q", got, granted)
	}
	if got := gitOn(t, filepath.Join(s.root, "me/other.git"), "for-each-ref", "refs/heads/"); got != "" {
		t.Errorf("the other repository got %q", got)
	}
}
