package egress

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo is a scratch repository the tests make commits in with real git.
type gitRepo struct {
	t   *testing.T
	dir string
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	r := &gitRepo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *gitRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+r.dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// commit writes a file (big enough for git to delta it against its
// previous version) and commits it, returning the commit's ID.
func (r *gitRepo) commit(name, text string) string {
	r.t.Helper()
	body := strings.Repeat("line of the file that stays the same in every version\n", 200) + text + "\n"
	if err := os.WriteFile(filepath.Join(r.dir, name), []byte(body), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.git("add", name)
	r.git("commit", "-q", "-m", text)
	return r.git("rev-parse", "HEAD")
}

// pack is what git push sends for have..want: git pack-objects with
// --revs (thin when asked, as push makes it).
func (r *gitRepo) pack(thin bool, revs ...string) []byte {
	r.t.Helper()
	args := []string{"pack-objects", "--stdout", "--revs", "-q"}
	if thin {
		args = append(args, "--thin")
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	cmd.Stdin = strings.NewReader(strings.Join(revs, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("git pack-objects: %v", err)
	}
	return out
}

// literal writes an object as given (git hash-object --literally) and
// returns its ID.
func (r *gitRepo) literal(typ, body string) string {
	r.t.Helper()
	cmd := exec.Command("git", "hash-object", "--literally", "-t", typ, "-w", "--stdin")
	cmd.Dir = r.dir
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("git hash-object: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// packOf is a pack of exactly these objects (git pack-objects, no walk).
func (r *gitRepo) packOf(ids ...string) []byte {
	r.t.Helper()
	cmd := exec.Command("git", "pack-objects", "--stdout", "-q")
	cmd.Dir = r.dir
	cmd.Stdin = strings.NewReader(strings.Join(ids, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("git pack-objects: %v", err)
	}
	return out
}

func pkt(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

// TestFastForwardFromPack: the pack git would push proves a fast-forward
// (two commits ahead, through a thin pack whose trees and blobs are deltas
// against objects the server has); a rewritten history (a force-push's
// pack) proves none, nor does a pack without the commits.
func TestFastForwardFromPack(t *testing.T) {
	r := newGitRepo(t)
	base := r.commit("a.txt", "one")
	r.commit("a.txt", "two")
	ahead := r.commit("a.txt", "three")
	thin := r.pack(true, ahead, "^"+base)
	commits, err := packCommits(thin)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := packEntries(thin)
	outside := 0
	for _, e := range entries {
		if e.typ == objRefDelta {
			outside++
		}
	}
	if outside == 0 {
		t.Fatal("the thin pack has no delta against an object outside it: this test would not show those are skipped")
	}
	if len(commits) != 2 || !fastForward(commits, base, ahead) {
		t.Fatalf("the pack of %s..%s proves no fast-forward: %v", base, ahead, commits)
	}
	// The same pack whole (no thin deltas) too, and with deltas between
	// its own objects (ofs-delta): every commit resolves.
	if c, err := packCommits(r.pack(false, ahead)); err != nil || len(c) != 3 || !fastForward(c, base, ahead) {
		t.Fatalf("the whole pack: %v %v", c, err)
	}
	r.git("reset", "-q", "--hard", base)
	rewritten := r.commit("a.txt", "other")
	c, err := packCommits(r.pack(true, rewritten, "^"+base))
	if err != nil {
		t.Fatal(err)
	}
	if fastForward(c, ahead, rewritten) {
		t.Fatalf("a rewritten history was taken for a fast-forward of %s", ahead)
	}
	if fastForward(map[string][]string{}, base, ahead) {
		t.Fatal("an empty pack proved a fast-forward")
	}
	if _, err := packCommits([]byte("PACK\x00\x00\x00\x02\x00\x00\x00\x05garbage....................")); err == nil {
		t.Fatal("a broken pack read")
	}
}

// TestPackOfBombs: a pack of zlib bombs (objects of 64 MiB less a byte
// of zeros, 64 KiB compressed each) is refused once what its objects
// inflate to, together, passes the bound: before, packEntries inflated
// each whole to find its end, and listed all 40 (2 s of CPU here; 500
// fit in a 32 MiB push).
func TestPackOfBombs(t *testing.T) {
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	zw.Write(make([]byte, maxPackInflated-1))
	zw.Close()
	const n = 40
	var p bytes.Buffer
	p.WriteString("PACK\x00\x00\x00\x02")
	binary.Write(&p, binary.BigEndian, uint32(n))
	for range n {
		p.Write([]byte{objBlob<<4 | 0x80, 0x01}) // the size it declares is not read
		p.Write(z.Bytes())
	}
	p.Write(make([]byte, 20))
	if entries, err := packEntries(p.Bytes()); err == nil {
		t.Fatalf("a pack of %d bombs listed: %d objects", n, len(entries))
	}
}

// TestThinDeltaInflatedOnce: a thin pack's delta whose base is outside
// it (40 MiB of inserted bytes, compressible) beside one object is read
// within the bound: before, it was inflated in each round of packCommits,
// the second time over the 64 MiB budget, and the push refused.
func TestThinDeltaInflatedOnce(t *testing.T) {
	delta := []byte{10, 0x80, 0x80, 0x80, 0x14} // from 10 bytes to 40 MiB
	for n := 40 << 20; n > 0; n -= 100 {
		delta = append(append(delta, 100), make([]byte, 100)...)
	}
	zipped := func(b []byte) []byte {
		var z bytes.Buffer
		zw := zlib.NewWriter(&z)
		zw.Write(b)
		zw.Close()
		return z.Bytes()
	}
	var p bytes.Buffer
	p.WriteString("PACK\x00\x00\x00\x02\x00\x00\x00\x02")
	p.Write([]byte{objBlob<<4 | 1})
	p.Write(zipped([]byte("a")))
	p.Write([]byte{objRefDelta<<4 | 0x80, 0x01})
	p.Write(bytes.Repeat([]byte{0xab}, 20)) // a base the pack does not hold
	p.Write(zipped(delta))
	p.Write(make([]byte, 20))
	if _, err := packCommits(p.Bytes()); err != nil {
		t.Fatal(err)
	}
}

// TestGitCheck: only smart HTTP for the lent repository passes, for the
// operations lent; a push's deletion and non-fast-forward update are
// refused without force, a new branch and a fast-forward pass, and the
// body the relay forwards is the body sent. Checked against weakened
// builds: with checkPush skipped, force-push and both deletions passed
// (this test failed on each); with the fast-forward walk always true,
// force-push passed.
func TestGitCheck(t *testing.T) {
	r := newGitRepo(t)
	base := r.commit("a.txt", "one")
	ahead := r.commit("a.txt", "two")
	r.git("reset", "-q", "--hard", base)
	other := r.commit("a.txt", "rewritten")
	lend := func(ops ...string) *Injector {
		return &Injector{git: map[string][]gitLent{"git.test:443": {{GitLend: GitLend{Host: "git.test:443", Repo: "me/repo", Ops: ops},
			user: "me", token: "TOKEN", placeholder: "PLACEHOLDER-0123456789"}}}}
	}
	push := func(cmds string, pack []byte) *http.Request {
		req := httptest.NewRequest("POST", "https://git.test/me/repo.git/git-receive-pack", io.MultiReader(strings.NewReader(cmds+"0000"), bytes.NewReader(pack)))
		req.RequestURI = "/me/repo.git/git-receive-pack"
		return req
	}
	get := func(target string) *http.Request {
		req := httptest.NewRequest("GET", "https://git.test"+target, nil)
		req.RequestURI = target
		return req
	}
	ffPack := r.pack(true, ahead, "^"+base)
	// Commits git reads without a parent: a parent line after the author
	// (git takes parents only right after the tree line) and one whose
	// line does not end the ID; the proxy read both as ahead's child, and
	// git receive-pack took the update, a history replaced by one commit.
	tree := r.literal("tree", "")
	late := r.literal("commit", "tree "+tree+"\nauthor t <t@t> 1 +0000\ncommitter t <t@t> 1 +0000\nparent "+ahead+"\n\nrewritten\n")
	noTree := r.literal("commit", "parent "+ahead+"\ntree "+tree+"\nauthor t <t@t> 1 +0000\ncommitter t <t@t> 1 +0000\n\nrewritten\n")
	spaced := r.literal("commit", "tree "+tree+"\nparent "+ahead+" \nauthor t <t@t> 1 +0000\ncommitter t <t@t> 1 +0000\n\nrewritten\n")
	cases := []struct {
		name string
		in   *Injector
		req  *http.Request
		ok   bool
	}{
		{"fetch refs", lend("fetch"), get("/me/repo.git/info/refs?service=git-upload-pack"), true},
		{"fetch refs without .git", lend("fetch"), get("/me/repo/info/refs?service=git-upload-pack"), true},
		{"push refs, fetch lent only", lend("fetch"), get("/me/repo.git/info/refs?service=git-receive-pack"), false},
		{"another repository", lend("fetch", "push"), get("/me/other.git/info/refs?service=git-upload-pack"), false},
		{"a prefix of the name", lend("fetch", "push"), get("/me/repo-x.git/info/refs?service=git-upload-pack"), false},
		{"dot segments", lend("fetch", "push"), get("/me/repo.git/../other.git/info/refs?service=git-upload-pack"), false},
		{"the dumb protocol", lend("fetch", "push"), get("/me/repo.git/HEAD"), false},
		{"another API of the host", lend("fetch", "push"), get("/api/v1/user"), false},
		{"new branch", lend("push"), push(pkt(zeroID+" "+ahead+" refs/heads/new\x00report-status\n"), ffPack), true},
		{"fast-forward", lend("push"), push(pkt(base+" "+ahead+" refs/heads/main\x00report-status\n"), ffPack), true},
		{"force-push", lend("push"), push(pkt(ahead+" "+other+" refs/heads/main\x00report-status\n"), r.pack(true, other, "^"+base)), false},
		{"force-push, force lent", lend("force"), push(pkt(ahead+" "+other+" refs/heads/main\x00report-status\n"), r.pack(true, other, "^"+base)), true},
		{"deletion", lend("push"), push(pkt(ahead+" "+zeroID+" refs/heads/main\x00report-status\n"), nil), false},
		{"deletion behind a new branch", lend("push"), push(pkt(zeroID+" "+ahead+" refs/heads/new\x00report-status\n")+pkt(ahead+" "+zeroID+" refs/heads/main\n"), ffPack), false},
		// git receive-pack reads a new ID of zeros as a deletion whatever
		// the old one, and an old ID of zeros that is no object as "the
		// ref, whatever it holds": zeros to zeros deletes the ref.
		{"deletion spelled zeros to zeros", lend("push"), push(pkt(zeroID+" "+zeroID+" refs/heads/main\x00report-status\n"), nil), false},
		{"a parent line after the author", lend("push"), push(pkt(ahead+" "+late+" refs/heads/main\x00report-status\n"), r.packOf(late, tree)), false},
		{"a parent line before the tree", lend("push"), push(pkt(ahead+" "+noTree+" refs/heads/main\x00report-status\n"), r.packOf(noTree, tree)), false},
		{"a parent line with a space after the ID", lend("push"), push(pkt(ahead+" "+spaced+" refs/heads/main\x00report-status\n"), r.packOf(spaced, tree)), false},
		{"deletion, force lent", lend("push", "force"), push(pkt(ahead+" "+zeroID+" refs/heads/main\x00report-status\n"), nil), true},
		{"not commands", lend("push"), push(pkt("hello\n"), nil), false},
		// A replace ref makes the server's git show another history for
		// a commit; only branches and tags are a push.
		{"a replace ref", lend("push"), push(pkt(zeroID+" "+ahead+" refs/replace/"+base+"\x00report-status\n"), ffPack), false},
		{"a new tag", lend("push"), push(pkt(zeroID+" "+ahead+" refs/tags/v1\x00report-status\n"), ffPack), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var sent []byte
			if c.req.Body != nil && c.req.Method == "POST" {
				sent, _ = io.ReadAll(c.req.Body)
				c.req.Body = io.NopCloser(bytes.NewReader(sent))
			}
			g := c.in.gitCheck(c.req, "git.test:443")
			if (g.why == "") != c.ok {
				t.Fatalf("allowed=%v, want %v (%s; %s)", g.why == "", c.ok, g.why, g.refs)
			}
			if g.why == "" && c.req.Method == "POST" {
				if got, _ := io.ReadAll(c.req.Body); !bytes.Equal(got, sent) {
					t.Fatalf("the body relayed is not the body sent (%d bytes, want %d)", len(got), len(sent))
				}
			}
		})
	}
}

// TestPullsCheck: with pr lent for github.com/me/repo, GitHub's API
// takes GET and POST of that repository's pull requests only.
func TestPullsCheck(t *testing.T) {
	g, err := ParseGitLend("https://github.com/me/repo=fetch,pr")
	if err != nil {
		t.Fatal(err)
	}
	in := &Injector{git: map[string][]gitLent{}}
	for _, hp := range g.Hosts() {
		in.git[hp] = append(in.git[hp], gitLent{GitLend: g, token: "TOKEN", placeholder: "PLACEHOLDER-0123456789"})
	}
	for _, c := range []struct {
		method, path string
		ok           bool
	}{
		{"POST", "/repos/me/repo/pulls", true},
		{"GET", "/repos/me/repo/pulls/12", true},
		{"GET", "/repos/Me/REPO/Pulls/12", true},
		{"GET", "/repos/me/reKpo/pulls", false},
		{"GET", "/repos/me/repo/pulls/12/comments", true},
		{"PATCH", "/repos/me/repo/pulls/12", false},
		// A review that approves (which can merge through auto-merge),
		// and an edit spelled POST (GitHub takes POST for PATCH).
		{"POST", "/repos/me/repo/pulls/12/reviews", false},
		{"POST", "/repos/me/repo/pulls/12", false},
		{"POST", "/repos/me/repo/pulls/12/merge", false},
		{"DELETE", "/repos/me/repo", false},
		{"GET", "/repos/me/repo/pullsx", false},
		{"POST", "/repos/me/other/pulls", false},
		{"GET", "/user", false},
		{"POST", "/graphql", false},
		{"GET", "/repos/me/repo/pulls/../../other/pulls", false},
	} {
		req := httptest.NewRequest(c.method, "https://api.github.com"+c.path, nil)
		req.RequestURI = c.path
		if got := in.gitCheck(req, GitHubAPI); (got.why == "") != c.ok {
			t.Errorf("%s %s: allowed=%v (%s), want %v", c.method, c.path, got.why == "", got.why, c.ok)
		}
	}
	if got := in.gitCheck(httptest.NewRequest("POST", "https://github.com/me/repo.git/git-receive-pack", nil), "github.com:443"); got.why == "" {
		t.Error("a push passed where only fetch and pr are lent")
	}
}

// TestPutGit: Basic user:PLACEHOLDER becomes the lend's user:TOKEN, a
// bearer's placeholder is replaced, and any other Authorization (a
// password of the session's own, a Basic whose user part holds the
// placeholder) passes as sent.
func TestPutGit(t *testing.T) {
	l := &gitLent{user: "me", token: "TOKEN", placeholder: "PLACEHOLDER-0123456789"}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, c := range []struct{ in, want string }{
		{"Basic " + b64("x:PLACEHOLDER-0123456789"), "Basic " + b64("me:TOKEN")},
		{"Bearer PLACEHOLDER-0123456789", "Bearer TOKEN"},
		{"token PLACEHOLDER-0123456789", "token TOKEN"},
		{"Basic " + b64("x:other"), "Basic " + b64("x:other")},
		{"Basic " + b64("PLACEHOLDER-0123456789:x"), "Basic " + b64("PLACEHOLDER-0123456789:x")},
	} {
		h := http.Header{"Authorization": {c.in}}
		l.putGit(h)
		if got := h.Get("Authorization"); got != c.want {
			t.Errorf("%s: got %s, want %s", c.in, got, c.want)
		}
	}
}

// TestParseGitLend: URLs and operations as --lend-git takes them.
func TestParseGitLend(t *testing.T) {
	for in, want := range map[string]string{
		"https://GitHub.com/me/repo":                  "https://github.com/me/repo=fetch,push",
		"https://git.test:8443/me/repo.git=fetch":     "https://git.test:8443/me/repo=fetch",
		"https://git.test/me/repo/=push,force":        "https://git.test/me/repo=push,force",
		"http://git.test/me/repo":                     "",
		"https://git.test/me":                         "",
		"https://git.test/me/repo/x":                  "",
		"https://git.test/../repo":                    "",
		"https://git.test/me/repo=delete":             "",
		"git@github.com:me/repo.git":                  "",
		"https://user:pass@git.test/me/repo":          "",
		"https://git.test/me/repo?x=1":                "",
		"https://git.test/me/re%2fpo":                 "",
		"https://git.test/me/repo=fetch,fetch,push":   "https://git.test/me/repo=fetch,push",
		"https://git.test:443/me/repo.git=fetch,push": "https://git.test/me/repo=fetch,push",
		"https://github.com/me/repo=push,pr":          "https://github.com/me/repo=push,pr",
		"https://git.test/me/repo=pr":                 "",
	} {
		g, err := ParseGitLend(in)
		got := ""
		if err == nil {
			got = g.String()
			if back, err := ParseGitLend(got); err != nil || back.String() != got {
				t.Errorf("%s does not read back: %v", got, err)
			}
		}
		if got != want {
			t.Errorf("%s: got %q (%v), want %q", in, got, err, want)
		}
	}
}

// TestGitCheckGitHubCase: GitHub names repositories without case, so a
// push or fetch of github.com/Me/REPO is one of a lent me/repo (with .git
// or without, as before); another repository, or a longer name, is still
// refused however it is spelled, and on another host (whose git server may
// keep Me/Repo and me/repo apart) the name is matched exactly. Before the
// fix the github.com spellings were refused ("not a repository lent to
// the session on this host": checked against that build).
func TestGitCheckGitHubCase(t *testing.T) {
	in := &Injector{git: map[string][]gitLent{}}
	for _, u := range []string{"https://github.com/me/repo=fetch,push", "https://git.test/me/repo=fetch,push"} {
		g, err := ParseGitLend(u)
		if err != nil {
			t.Fatal(err)
		}
		in.git[g.Host] = append(in.git[g.Host], gitLent{GitLend: g, token: "TOKEN", placeholder: "PLACEHOLDER-0123456789"})
	}
	for _, c := range []struct {
		hp, path string
		ok       bool
	}{
		{"github.com:443", "/me/repo.git/info/refs?service=git-receive-pack", true},
		{"github.com:443", "/Me/Repo.git/info/refs?service=git-receive-pack", true},
		{"github.com:443", "/ME/REPO/info/refs?service=git-upload-pack", true},
		{"github.com:443", "/mE/rEpO.git/info/refs?service=git-upload-pack", true},
		{"github.com:443", "/Me/Other.git/info/refs?service=git-receive-pack", false},
		{"github.com:443", "/Me/Repo-x.git/info/refs?service=git-receive-pack", false},
		{"github.com:443", "/Me/RepoX/info/refs?service=git-receive-pack", false},
		{"github.com:443", "/Me/Repo.gitx/info/refs?service=git-receive-pack", false},
		{"github.com:443", "/Other/Repo.git/info/refs?service=git-receive-pack", false},
		{"github.com:443", "/Me/Repo.git/HEAD", false},
		{"git.test:443", "/me/repo.git/info/refs?service=git-receive-pack", true},
		{"git.test:443", "/Me/Repo.git/info/refs?service=git-receive-pack", false},
	} {
		req := httptest.NewRequest("GET", "https://"+c.hp+c.path, nil)
		req.RequestURI = c.path
		if got := in.gitCheck(req, c.hp); (got.why == "") != c.ok {
			t.Errorf("GET %s%s: allowed=%v (%s), want %v", c.hp, c.path, got.why == "", got.why, c.ok)
		}
	}
}
