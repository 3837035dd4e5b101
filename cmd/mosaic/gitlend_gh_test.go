package main

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// githubStandIn stands in for github.com's API on the rig's test network:
// contrib/rig.sh names api.github.com and github.com as its test host
// N.4, which forwards 443 to registryTLSPort here on N.1 (so it serves
// where the registries' stand-in does, in tests that do not run in
// parallel). It answers gh pr create's REST and GraphQL calls for
// me/repo (node id R_lent) and me/other (R_other), and records each
// request that came with the token.
type githubStandIn struct {
	caPEM []byte
	token string
	mu    sync.Mutex
	seen  []string // "GET /repos/me/repo", "graphql createPullRequest R_lent", ...
	auths []string // an Authorization that was not the token's
}

func (g *githubStandIn) record(s string, list *[]string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	*list = append(*list, s)
}

func (g *githubStandIn) requests() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return strings.Join(g.seen, "\n") + "\n"
}

func startGitHubStandIn(t *testing.T, n, token string) *githubStandIn {
	t.Helper()
	caPEM, cert := testCAFor(t, "api.github.com", "github.com")
	g := &githubStandIn{caPEM: caPEM, token: token}
	// me/old is me/repo's name before a rename: GitHub's REST API answers
	// it with a redirect to the repository's id, its GraphQL API with the
	// repository.
	ids := map[string]string{"repo": "R_lent", "other": "R_other", "old": "R_lent"}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "token "+token {
			g.record(r.Method+" "+r.URL.Path+" "+a, &g.auths)
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.Method == "GET" && (r.URL.Path == "/repos/me/old" || r.URL.Path == "/repositories/42") {
			g.record("GET "+r.URL.Path, &g.seen)
			if r.URL.Path == "/repos/me/old" {
				w.Header().Set("Location", "https://api.github.com/repositories/42")
				w.WriteHeader(http.StatusMovedPermanently)
				io.WriteString(w, `{"message":"Moved Permanently","url":"https://api.github.com/repositories/42"}`)
				return
			}
			json.NewEncoder(w).Encode(map[string]string{"node_id": "R_lent", "full_name": "me/repo"})
			return
		}
		if r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/repos/me/") {
			name := strings.TrimPrefix(r.URL.Path, "/repos/me/")
			g.record("GET "+r.URL.Path, &g.seen)
			json.NewEncoder(w).Encode(map[string]string{"node_id": ids[name], "full_name": "me/" + name})
			return
		}
		if r.Method != "POST" || r.URL.Path != "/graphql" {
			g.record(r.Method+" "+r.URL.Path, &g.seen)
			http.NotFound(w, r)
			return
		}
		var req struct {
			Query     string
			Variables map[string]any
		}
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &req)
		io.WriteString(w, g.graphql(req.Query, req.Variables, ids))
	})}
	l, err := tls.Listen("tcp", net.JoinHostPort(n+".1", registryTLSPort), &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatalf("the GitHub stand-in: %v", err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return g
}

// graphql answers gh's documents as GitHub would, for the repository its
// variables or literals name, and records each: the mutations by name
// and repositoryId, the queries by their repository.
func (g *githubStandIn) graphql(query string, vars map[string]any, ids map[string]string) string {
	name, _ := vars["name"].(string)
	if r, ok := vars["repo"].(string); ok {
		name = r
	}
	if name == "" && strings.Contains(query, `name: "other"`) {
		name = "other"
	} else if name == "" {
		name = "repo"
	}
	repo := map[string]any{"id": ids[name], "name": name, "owner": map[string]string{"login": "me"}, "hasIssuesEnabled": true,
		"description": "", "hasWikiEnabled": false, "viewerPermission": "ADMIN", "defaultBranchRef": map[string]string{"name": "main"},
		"isPrivate": false, "parent": nil, "mergeCommitAllowed": true, "rebaseMergeAllowed": true, "squashMergeAllowed": true,
		"pullRequests": map[string]any{"nodes": []any{}}}
	var data any
	switch {
	case strings.Contains(query, "createPullRequest"):
		input, _ := vars["input"].(map[string]any)
		id, _ := input["repositoryId"].(string)
		if id == "" && strings.Contains(query, `repositoryId:"R_other"`) {
			id = "R_other (literal)"
		}
		g.record("graphql createPullRequest "+id, &g.seen)
		data = map[string]any{"createPullRequest": map[string]any{"pullRequest": map[string]any{"id": "PR_1", "url": "https://github.com/me/" + name + "/pull/1"}}}
	case strings.HasPrefix(strings.TrimSpace(query), "mutation"):
		g.record("graphql "+strings.Join(strings.Fields(query), " "), &g.seen)
		data = map[string]any{}
	case strings.Contains(query, "repository("):
		g.record("graphql query me/"+name, &g.seen)
		data = map[string]any{"repository": repo, "repo_000": repo, "viewer": map[string]string{"login": "me"}}
	default:
		g.record("graphql query viewer", &g.seen)
		data = map[string]any{"viewer": map[string]string{"login": "me"}}
	}
	b, _ := json.Marshal(map[string]any{"data": data})
	return string(b)
}

// ghPRScript runs inside a session lent github.com/me/repo for fetch,
// push and pr: the real gh opens a pull request for a branch of the lent
// repository (its git remote), then, as a prompt-injected agent would, the
// same for another repository, a merge through gh api graphql, and a
// createPullRequest naming the other repository's node id by hand; then
// looks for the token (given in two halves) where the session can.
const ghPRScript = `
half1=$1 half2=$2
token="$half1$half2"
export GH_NO_UPDATE_NOTIFIER=1 GH_PROMPT_DISABLED=1
try() { name=$1; shift; if "$@" >/tmp/out.$name 2>&1; then echo "$name=ok"; else echo "$name=refused"; fi; sed 's/^/  /' /tmp/out.$name; echo; }
git init -q /tmp/w && cd /tmp/w && git remote add origin https://github.com/me/repo.git
try create gh pr create --title T --body B --head feature
git remote set-url origin https://github.com/me/other.git
try other-repo gh pr create --title T --body B --head feature
try merge gh api graphql -f query='mutation{mergePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId}}'
try other-id gh api graphql -f query='mutation{createPullRequest(input:{repositoryId:"R_other",baseRefName:"main",headRefName:"feature",title:"T"}){pullRequest{url}}}'
found=
env | grep -qF -- "$token" && found="$found env"
grep -rqsF -- "$token" "$HOME" /tmp /run/mosaic 2>/dev/null && found="$found files"
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\0' '\n' 2>/dev/null <"$f" | grep -qF -- "$token" && found="$found $f"; done
echo "token-found:${found:-nowhere}"
`

// TestLendGitGHPRCreate (issue 42): the real gh pr create works inside a
// session lent github.com/me/repo=fetch,push,pr against a stand-in of
// GitHub's API: the stand-in's createPullRequest gets the lent repository's
// node id with the real token in Authorization (the proxy asked
// GET /repos/me/repo for it), while the session held only the placeholder
// (GH_TOKEN) and finds the token nowhere. The same gh command for
// me/other, a merge by gh api graphql and a createPullRequest naming
// me/other's node id are refused: the stand-in never sees them, and each
// is an audit event. First shown to fail against a weakened proxy (built
// -tags mosaic_weakened: every GraphQL call forwarded with the token):
// there the stand-in sees all three.
func TestLendGitGHPRCreate(t *testing.T) {
	n := needTestNet(t)
	if _, err := exec.LookPath("gh"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must run this test, but gh is missing: contrib/install-deps.sh installs it on the host, contrib/rig-root.sh in the 257 root")
		}
		t.Skip("gh is missing (contrib/install-deps.sh installs it)")
	}
	token := "gho_" + strings.Repeat(randomHex(), 4)
	gh := startGitHubStandIn(t, n, token)
	dir := t.TempDir()
	roots := filepath.Join(dir, "roots.pem")
	must(t, os.WriteFile(roots, gh.caPEM, 0o644))
	env := append(credentialStore(t, dir, "https://github.com", token, roots), "MOSAIC_EGRESS_TEST_ROOTS="+roots)
	run := func(bin string) (result, string) {
		name := sessionName(t)
		cmd := exec.Command(bin, "run", "--name", name, "--network", "allow", "--allow-host", n+".0/24", "-w", workspace(t),
			"--lend-git", "https://github.com/me/repo=fetch,push,pr", "--", "bash", "-c", ghPRScript, "bash", token[:10], token[10:])
		cmd.Env = append(os.Environ(), env...)
		return runResult(t, cmd), name
	}
	refused := []string{"graphql query me/other", "graphql createPullRequest R_other\n", "graphql mutation{mergePullRequest", "graphql createPullRequest R_other (literal)"}

	r, _ := run(taggedMosaic(t, "mosaic_weakened"))
	t.Logf("weakened:\n%s%s\nthe stand-in saw:\n%s", r.stdout, r.stderr, gh.requests())
	for _, want := range refused {
		if !strings.Contains(gh.requests(), want) {
			t.Fatalf("with every GraphQL call forwarded, the stand-in did not see %q: this test proves nothing", want)
		}
	}
	gh.mu.Lock()
	gh.seen = nil
	gh.mu.Unlock()

	r, name := run(mosaicBin)
	t.Logf("the session:\n%s%s\nthe stand-in saw:\n%s", r.stdout, r.stderr, gh.requests())
	for _, want := range []string{"create=ok", "other-repo=refused", "merge=refused", "other-id=refused", "token-found:nowhere"} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("want %s in:\n%s", want, r.stdout)
		}
	}
	seen := gh.requests()
	for _, want := range []string{"GET /repos/me/repo", "graphql query me/repo", "graphql createPullRequest R_lent"} {
		if !strings.Contains(seen, want) {
			t.Errorf("the stand-in did not see %q (with the token)", want)
		}
	}
	for _, bad := range refused {
		if strings.Contains(seen, bad) {
			t.Errorf("the stand-in saw %q", bad)
		}
	}
	gh.mu.Lock()
	if len(gh.auths) > 0 {
		t.Errorf("requests reached the stand-in without the token: %q", gh.auths)
	}
	gh.mu.Unlock()
	au := mosaic(t, "audit", name).stdout
	t.Logf("mosaic audit:\n%s", au)
	for _, want := range []string{"git-lend-allowed", "graphql mutation PullRequestCreate", "GET /repos/me/repo by the proxy: node id R_lent", "git-lend-refused", "runs the mutation mergePullRequest", "not the lent me/repo"} {
		if !strings.Contains(au, want) {
			t.Errorf("want %q in mosaic audit:\n%s", want, au)
		}
	}
	if strings.Contains(au+r.stdout+r.stderr, token) {
		t.Error("the token is in the audit or mosaic's output")
	}
}

// TestLendGitGHPRCreateRenamed (issue 42): gh pr create in a session lent
// github.com/me/old, a repository since renamed me/repo (GitHub's
// GET /repos/me/old answers 301 to /repositories/42), works: the proxy
// follows that one redirect for the node id, and the stand-in's
// createPullRequest gets R_lent. Before the fix the lookup failed ("301
// Moved Permanently") and gh's createPullRequest was refused; checked
// against that build.
func TestLendGitGHPRCreateRenamed(t *testing.T) {
	n := needTestNet(t)
	if _, err := exec.LookPath("gh"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must run this test, but gh is missing: contrib/install-deps.sh installs it on the host, contrib/rig-root.sh in the 257 root")
		}
		t.Skip("gh is missing (contrib/install-deps.sh installs it)")
	}
	token := "gho_" + strings.Repeat(randomHex(), 4)
	gh := startGitHubStandIn(t, n, token)
	dir := t.TempDir()
	roots := filepath.Join(dir, "roots.pem")
	must(t, os.WriteFile(roots, gh.caPEM, 0o644))
	script := `export GH_NO_UPDATE_NOTIFIER=1 GH_PROMPT_DISABLED=1
git init -q /tmp/w && cd /tmp/w && git remote add origin https://github.com/me/old.git
if gh pr create --title T --body B --head feature >/tmp/out 2>&1; then echo create=ok; else echo create=refused; fi; cat /tmp/out`
	cmd := exec.Command(mosaicBin, "run", "--name", sessionName(t), "--network", "allow", "--allow-host", n+".0/24", "-w", workspace(t),
		"--lend-git", "https://github.com/me/old=fetch,push,pr", "--", "bash", "-c", script)
	cmd.Env = append(append(os.Environ(), credentialStore(t, dir, "https://github.com", token, roots)...), "MOSAIC_EGRESS_TEST_ROOTS="+roots)
	r := runResult(t, cmd)
	seen := gh.requests()
	if !strings.Contains(r.stdout, "create=ok\n") || !strings.Contains(seen, "GET /repositories/42\n") || !strings.Contains(seen, "graphql createPullRequest R_lent\n") {
		t.Errorf("gh pr create for the renamed repository:\n%s%s\nthe stand-in saw:\n%s", r.stdout, r.stderr, seen)
	}
}
