package egress

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// gh's documents, as gh 2.23 to 2.46 send them (github.com/cli/cli:
// api/queries_repo.go, pkg/cmd/pr/shared/finder.go, api/queries_pr.go,
// api/queries_user.go).
const (
	ghRepositoryInfo = `
	fragment repo on Repository {
		id
		name
		owner { login }
		hasIssuesEnabled
		description
		hasWikiEnabled
		viewerPermission
		defaultBranchRef {
			name
		}
	}

	query RepositoryInfo($owner: String!, $name: String!) {
		repository(owner: $owner, name: $name) {
			...repo
			parent {
				...repo
			}
			mergeCommitAllowed
			rebaseMergeAllowed
			squashMergeAllowed
		}
	}`
	ghRepositoryNetwork = `
	fragment repo on Repository {
		id
		name
		owner { login }
		viewerPermission
		defaultBranchRef {
			name
		}
		isPrivate
	}
	query RepositoryNetwork {
		viewer { login }
		
		repo_000: repository(owner: "me", name: "repo") {
			...repo
			parent {
				...repo
			}
		}
		
	}`
	ghPullRequestForBranch = `
	query PullRequestForBranch($owner: String!, $repo: String!, $headRefName: String!, $states: [PullRequestState!]) {
		repository(owner: $owner, name: $repo) {
			pullRequests(headRefName: $headRefName, states: $states, first: 30, orderBy: { field: CREATED_AT, direction: DESC }) {
				nodes {id,number,url,state,baseRefName,headRefName,isCrossRepository,headRepositoryOwner{id,login,...on User{name}}}
			}
			defaultBranchRef { name }
		}
	}`
	ghPullRequestCreate = `
		mutation PullRequestCreate($input: CreatePullRequestInput!) {
			createPullRequest(input: $input) {
				pullRequest {
					id
					url
				}
			}
	}`
	ghUserCurrent = `query UserCurrent{viewer{login}}`
)

// gqlBody is a GraphQL request's JSON body.
func gqlBody(query string, vars map[string]any) string {
	b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return string(b)
}

// TestCheckGraphQL (issue 42): with pr lent for me/repo, gh's own
// documents for gh pr create pass, and every other shape is refused: other
// root fields, other repositories (however spelled or hidden: aliases,
// fragments, inline fragments, directives, a second operation), other
// mutations, a subscription, and a body that could be read two ways.
func TestCheckGraphQL(t *testing.T) {
	ownerName := map[string]any{"owner": "me", "name": "repo"}
	create := map[string]any{"input": map[string]any{"repositoryId": "R_lent", "baseRefName": "main", "headRefName": "feature", "title": "T", "body": "B"}}
	for _, c := range []struct {
		name, body string
		ok         bool
		ids        []string
	}{
		// What gh sends.
		{"gh RepositoryInfo", gqlBody(ghRepositoryInfo, ownerName), true, nil},
		{"gh RepositoryInfo, owner and name in another case", gqlBody(ghRepositoryInfo, map[string]any{"owner": "Me", "name": "REPO"}), true, nil},
		{"gh RepositoryNetwork", gqlBody(ghRepositoryNetwork, nil), true, nil},
		{"gh PullRequestForBranch", gqlBody(ghPullRequestForBranch, map[string]any{"owner": "me", "repo": "repo", "headRefName": "feature", "states": []string{"OPEN"}}), true, nil},
		{"gh PullRequestCreate", gqlBody(ghPullRequestCreate, create), true, []string{"R_lent"}},
		{"gh UserCurrent", gqlBody(ghUserCurrent, nil), true, nil},
		{"createPullRequest, input literal", gqlBody(`mutation{createPullRequest(input:{repositoryId:"R_x",baseRefName:"main",headRefName:"f",title:"t"}){pullRequest{url}}}`, nil), true, []string{"R_x"}},
		{"createPullRequest, repositoryId a variable", gqlBody(`mutation($id:ID!){createPullRequest(input:{repositoryId:$id,baseRefName:"main",headRefName:"f",title:"t"}){pullRequest{url}}}`, map[string]any{"id": "R_y"}), true, []string{"R_y"}},

		// Other repositories.
		{"another repository", gqlBody(ghRepositoryInfo, map[string]any{"owner": "me", "name": "other"}), false, nil},
		{"another owner", gqlBody(ghRepositoryInfo, map[string]any{"owner": "you", "name": "repo"}), false, nil},
		{"a name with .git", gqlBody(ghRepositoryInfo, map[string]any{"owner": "me", "name": "repo.git"}), false, nil},
		{"a name folding to the lent one (Kelvin sign)", gqlBody(`{repository(owner:"me",name:"repo\u212a"){id}}`, nil), false, nil},
		{"a variable left to its default", gqlBody(`query($o:String="you"){repository(owner:$o,name:"repo"){id}}`, nil), false, nil},
		{"a variable not a string", gqlBody(`query($o:String){repository(owner:$o,name:"repo"){id}}`, map[string]any{"o": []string{"me"}}), false, nil},
		{"owner twice", gqlBody(`{repository(owner:"me",owner:"you",name:"repo"){id}}`, nil), false, nil},
		{"another argument", gqlBody(`{repository(owner:"me",name:"repo",followRenames:true){id}}`, nil), false, nil},
		{"the lent one, then another under an alias", gqlBody(`{a:repository(owner:"me",name:"repo"){id} repository:repository(owner:"me",name:"other"){id}}`, nil), false, nil},
		{"another in a fragment spread", gqlBody(`query{...F} fragment F on Query{repository(owner:"me",name:"other"){id}}`, nil), false, nil},
		{"another in an inline fragment", gqlBody(`query{... on Query{repository(owner:"me",name:"other"){id}}}`, nil), false, nil},
		{"another under @skip", gqlBody(`query{repository(owner:"me",name:"other")@skip(if:true){id}}`, nil), false, nil},
		{"a second operation", gqlBody(ghUserCurrent+` query Other{repository(owner:"me",name:"other"){id}}`, nil), false, nil},

		// Other root fields.
		{"node(id:)", gqlBody(`{node(id:"R_other"){... on Repository{name}}}`, nil), false, nil},
		{"nodes", gqlBody(`{nodes(ids:["R_other"]){id}}`, nil), false, nil},
		{"search", gqlBody(`{search(query:"secret",type:REPOSITORY,first:10){repositoryCount}}`, nil), false, nil},
		{"an aliased search", gqlBody(`{repository:search(query:"x",type:REPOSITORY,first:1){repositoryCount}}`, nil), false, nil},
		{"organization", gqlBody(`{organization(login:"me"){repositories(first:100){nodes{name}}}}`, nil), false, nil},
		{"introspection", gqlBody(`{__schema{types{name}}}`, nil), false, nil},
		{"viewer's repositories", gqlBody(`{viewer{login repositories(first:100){nodes{name}}}}`, nil), false, nil},
		{"viewer's repositories in a fragment", gqlBody(`{viewer{...V}} fragment V on User{repositories(first:100){nodes{name}}}`, nil), false, nil},
		{"the owner's repositories", gqlBody(`{repository(owner:"me",name:"repo"){owner{... on User{repositories(first:100){nodes{name}}}}}}`, nil), false, nil},
		{"the owner's repositories in a fragment", gqlBody(`{repository(owner:"me",name:"repo"){owner{...O}}} fragment O on User{repositories(first:100){nodes{name}}}`, nil), false, nil},
		{"a file of the repository", gqlBody(`{repository(owner:"me",name:"repo"){object(expression:"HEAD:secret"){... on Blob{text}}}}`, nil), false, nil},
		{"a pull request's repository", gqlBody(`{repository(owner:"me",name:"repo"){pullRequests(first:1){nodes{repository{id}}}}}`, nil), false, nil},
		{"the parent's parent", gqlBody(`{repository(owner:"me",name:"repo"){parent{parent{id}}}}`, nil), false, nil},
		{"the parent owner's repositories", gqlBody(`{repository(owner:"me",name:"repo"){parent{owner{... on User{repositories(first:9){nodes{name}}}}}}}`, nil), false, nil},
		{"a pull request's head repository's pull requests", gqlBody(`{repository(owner:"me",name:"repo"){pullRequests(first:1){edges{node{headRepository{pullRequests(first:9){nodes{body}}}}}}}}`, nil), false, nil},
		{"more through createPullRequest's answer", gqlBody(`mutation{createPullRequest(input:{repositoryId:"R_x"}){pullRequest{headRepository{object(expression:"HEAD:x"){id}}}}}`, nil), false, nil},
		{"a fragment spreading itself", gqlBody(`{...F} fragment F on Query{...F}`, nil), false, nil},
		{"a fragment defined twice", gqlBody(`{...F} fragment F on Query{viewer{login}} fragment F on Query{search(query:"x",type:REPOSITORY,first:1){repositoryCount}}`, nil), false, nil},
		{"a fragment not defined", gqlBody(`{...F}`, nil), false, nil},

		// Other mutations and operations.
		{"updatePullRequest", gqlBody(`mutation($input:UpdatePullRequestInput!){updatePullRequest(input:$input){clientMutationId}}`, map[string]any{"input": map[string]any{"pullRequestId": "PR_1", "title": "x"}}), false, nil},
		{"mergePullRequest", gqlBody(`mutation{mergePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId}}`, nil), false, nil},
		{"a review", gqlBody(`mutation{addPullRequestReview(input:{pullRequestId:"PR_1",event:APPROVE}){clientMutationId}}`, nil), false, nil},
		{"addComment", gqlBody(`mutation{addComment(input:{subjectId:"I_1",body:"x"}){clientMutationId}}`, nil), false, nil},
		{"createRepository", gqlBody(`mutation{createRepository(input:{name:"x",visibility:PUBLIC}){clientMutationId}}`, nil), false, nil},
		{"createPullRequest, then a merge", gqlBody(`mutation{createPullRequest(input:{repositoryId:"R_x"}){clientMutationId} m:mergePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId}}`, nil), false, nil},
		{"a merge aliased createPullRequest", gqlBody(`mutation{createPullRequest:mergePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId}}`, nil), false, nil},
		{"createPullRequest in a second operation beside a merge", gqlBody(ghPullRequestCreate+` mutation M{mergePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId}}`, create), false, nil},
		{"a merge in a fragment", gqlBody(`mutation{...M} fragment M on Mutation{mergePullRequest(input:{pullRequestId:"PR_1"}){clientMutationId}}`, nil), false, nil},
		{"createPullRequest without repositoryId", gqlBody(`mutation{createPullRequest(input:{title:"x"}){clientMutationId}}`, nil), false, nil},
		{"createPullRequest, repositoryId twice", gqlBody(`mutation{createPullRequest(input:{repositoryId:"R_x",repositoryId:"R_y"}){clientMutationId}}`, nil), false, nil},
		{"createPullRequest, input variable missing", gqlBody(ghPullRequestCreate, nil), false, nil},
		{"a subscription", gqlBody(`subscription{repository(owner:"me",name:"repo"){id}}`, nil), false, nil},
		{"a query in a mutation", gqlBody(`mutation{repository(owner:"me",name:"repo"){id}}`, nil), false, nil},

		// Bodies that could be read two ways, or not at all.
		{"query twice", `{"query":"{viewer{login}}","query":"{search(query:\"x\",type:REPOSITORY,first:1){repositoryCount}}"}`, false, nil},
		{"a variable twice", `{"query":"query($o:String!){repository(owner:$o,name:\"repo\"){id}}","variables":{"o":"me","o":"you"}}`, false, nil},
		{"repositoryId twice in the input", `{"query":"mutation($input:CreatePullRequestInput!){createPullRequest(input:$input){clientMutationId}}","variables":{"input":{"repositoryId":"R_x","repositoryId":"R_y"}}}`, false, nil},
		{"Query spelled otherwise", `{"Query":"{viewer{login}}"}`, false, nil},
		{"an extension", `{"query":"{viewer{login}}","extensions":{"persistedQuery":{"sha256Hash":"x"}}}`, false, nil},
		{"a batch", `[{"query":"{viewer{login}}"}]`, false, nil},
		{"two objects", `{"query":"{viewer{login}}"}{"query":"{search}"}`, false, nil},
		{"not UTF-8", "{\"query\":\"{viewer{login}}\xff\"}", false, nil},
		{"no operation", gqlBody(`fragment F on Query{viewer{login}}`, nil), false, nil},
		{"does not parse", gqlBody(`{repository(owner:"me",name:"repo"){id}`, nil), false, nil},
		{"too many JSON tokens", gqlBody(ghUserCurrent, map[string]any{"pad": make([]int, maxGraphQLJSONTokens)}), false, nil},
		{"too many tokens", gqlBody("{viewer{"+strings.Repeat("login ", maxGraphQLTokens)+"}}", nil), false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			call, why := checkGraphQL([]byte(c.body), "me/repo")
			if (why == "") != c.ok {
				t.Fatalf("allowed=%v (%s), want %v", why == "", why, c.ok)
			}
			if c.ok && strings.Join(call.repoIDs, ",") != strings.Join(c.ids, ",") {
				t.Errorf("repositoryIds %q, want %q", call.repoIDs, c.ids)
			}
			t.Logf("%s%s", call.what, why)
		})
	}
}

// TestCheckGraphQLFragmentsOnce: fragments spread many times each, in
// fragments spread many times, are each checked once (no blow-up).
func TestCheckGraphQLFragmentsOnce(t *testing.T) {
	q := "{...F0}"
	for i := range 12 {
		q += " fragment F" + strconv.Itoa(i) + " on Query{" + strings.Repeat("...F"+strconv.Itoa(i+1)+" ", 30) + "}"
	}
	q += " fragment F12 on Query{viewer{login}}"
	if _, why := checkGraphQL([]byte(gqlBody(q, nil)), "me/repo"); why != "" {
		t.Fatalf("refused: %s", why)
	}
}

// TestGraphQLCheck: the proxy's side of GraphQL under pr: a POST of
// /graphql whose document passes takes the lend; another method, a body
// not JSON, over MaxGraphQLBody, or gzipped is refused; the body relayed
// is the body sent; a second lend's repository takes its own lend.
func TestGraphQLCheck(t *testing.T) {
	in := &Injector{git: map[string][]gitLent{}}
	for _, s := range []string{"https://github.com/me/repo=fetch,pr", "https://github.com/me/two=pr", "https://github.com/me/nopr=fetch"} {
		g, err := ParseGitLend(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, hp := range g.Hosts() {
			in.git[hp] = append(in.git[hp], gitLent{GitLend: g, token: "TOKEN", placeholder: "PLACEHOLDER-0123456789"})
		}
	}
	req := func(method, target, ctype, enc, body string) *http.Request {
		r := httptest.NewRequest(method, "https://api.github.com"+target, strings.NewReader(body))
		r.RequestURI = target
		r.Header.Set("Content-Type", ctype)
		if enc != "" {
			r.Header.Set("Content-Encoding", enc)
		}
		return r
	}
	info := func(owner, name string) string {
		return gqlBody(ghRepositoryInfo, map[string]any{"owner": owner, "name": name})
	}
	json := "application/json; charset=utf-8"
	for _, c := range []struct {
		name string
		req  *http.Request
		repo string // the lend taken, "" when refused
	}{
		{"gh's query", req("POST", "/graphql", json, "", info("me", "repo")), "me/repo"},
		{"the second lend's", req("POST", "/graphql", json, "", info("me", "two")), "me/two"},
		{"a repository lent without pr", req("POST", "/graphql", json, "", info("me", "nopr")), ""},
		{"GET", req("GET", "/graphql?query=%7Bviewer%7Blogin%7D%7D", json, "", ""), ""},
		{"a query string", req("POST", "/graphql?x=1", json, "", info("me", "repo")), ""},
		{"form-encoded", req("POST", "/graphql", "application/x-www-form-urlencoded", "", "query=%7Bviewer%7Blogin%7D%7D"), ""},
		{"gzipped", req("POST", "/graphql", json, "gzip", info("me", "repo")), ""},
		{"over the bound", req("POST", "/graphql", json, "", gqlBody(ghUserCurrent, map[string]any{"pad": strings.Repeat("x", MaxGraphQLBody)})), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sent []byte
			if c.req.Body != nil {
				sent, _ = io.ReadAll(c.req.Body)
				c.req.Body = io.NopCloser(strings.NewReader(string(sent)))
			}
			g := in.gitCheck(c.req, GitHubAPI)
			if (g.why == "") != (c.repo != "") {
				t.Fatalf("allowed=%v (%s), want the lend of %q", g.why == "", g.why, c.repo)
			}
			if g.why == "" {
				if g.lend.Repo != c.repo {
					t.Errorf("took the lend of %s, want %s", g.lend.Repo, c.repo)
				}
				if got, _ := io.ReadAll(c.req.Body); string(got) != string(sent) {
					t.Errorf("the body relayed is not the body sent")
				}
			}
		})
	}
}

// TestCheckRepoIDs: a createPullRequest passes only with the node id of
// a lent repository the document fits (known here as GitHub gave it, for
// a lend spelled in another case), and takes that lend's token.
func TestCheckRepoIDs(t *testing.T) {
	one := &gitLent{GitLend: GitLend{Host: GitHubAPI, Repo: "Me/Repo", Ops: []string{"pr"}}}
	two := &gitLent{GitLend: GitLend{Host: GitHubAPI, Repo: "me/two", Ops: []string{"pr"}}}
	e := &Egress{Session: "s1", Log: io.Discard, Inject: &Injector{nodeIDs: map[string]string{"me/repo": "R_lent", "me/two": "R_two"}}}
	for _, c := range []struct {
		ids  []string
		fits []*gitLent
		want *gitLent // the lend taken, nil when refused
	}{
		{[]string{"R_lent"}, []*gitLent{one, two}, one},
		{[]string{"R_lent", "R_lent"}, []*gitLent{one}, one},
		{[]string{"R_two"}, []*gitLent{one, two}, two},
		{[]string{"R_two"}, []*gitLent{one}, nil},
		{[]string{"R_other"}, []*gitLent{one, two}, nil},
		{[]string{"R_lent", "R_two"}, []*gitLent{one, two}, nil},
		{[]string{"r_lent"}, []*gitLent{one}, nil},
	} {
		g := gitRequest{lend: c.fits[0], repoIDs: c.ids, fits: c.fits}
		why := e.checkRepoIDs(&g)
		if (why == "") != (c.want != nil) || c.want != nil && g.lend != c.want {
			t.Errorf("%q of %d lends: allowed=%v (%s), lend %s", c.ids, len(c.fits), why == "", why, g.lend.Repo)
		}
	}
}

// FuzzCheckGraphQL: no document or body makes the check panic, and what
// it allows names no root field but repository, viewer and
// createPullRequest (go test -fuzz FuzzCheckGraphQL ./sandbox/egress).
func FuzzCheckGraphQL(f *testing.F) {
	for _, q := range []string{ghRepositoryInfo, ghRepositoryNetwork, ghPullRequestForBranch, ghPullRequestCreate, ghUserCurrent} {
		f.Add(q, `{"owner":"me","name":"repo","repo":"repo","input":{"repositoryId":"R_x"}}`)
	}
	f.Fuzz(func(t *testing.T, query, vars string) {
		var v map[string]any
		if json.Unmarshal([]byte(vars), &v) != nil {
			v = nil
		}
		body := []byte(gqlBody(query, v))
		if _, why := checkGraphQL(body, "me/repo"); why != "" {
			return
		}
		doc, err := parser.ParseQuery(&ast.Source{Input: query})
		if err != nil {
			t.Fatalf("allowed a document that does not parse: %q", query)
		}
		for _, op := range doc.Operations {
			for _, s := range op.SelectionSet {
				if fl, ok := s.(*ast.Field); ok && fl.Name != "repository" && fl.Name != "viewer" && fl.Name != "createPullRequest" {
					t.Fatalf("allowed %s in %q", fl.Name, query)
				}
			}
		}
	})
}

// TestRepoNodeIDMoved (issue 42): a lent repository renamed or moved,
// whose GET /repos/OWNER/REPO GitHub answers 301 to
// /repositories/ID, has the node id of that repository (one hop followed,
// with the token), and a createPullRequest naming it passes while one
// naming another still does not; a redirect to another host, to another
// path of the API, or a second one is not followed (the token goes
// nowhere else). Before the fix the renamed repository's lookup failed
// ("GET /repos/me/old: 301 Moved Permanently") and its createPullRequest
// was refused: checked against that build.
func TestRepoNodeIDMoved(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	answers := map[string]string{
		"/repos/me/old":       "301 https://api.github.com/repositories/42",
		"/repositories/42":    `{"node_id":"R_lent","full_name":"me/repo"}`,
		"/repos/me/away":      "301 https://evil.example/repositories/42",
		"/repos/me/port":      "301 https://api.github.com:8443/repositories/42",
		"/repos/me/sideways":  "301 https://api.github.com/repos/me/secret",
		"/repos/me/query":     "301 https://api.github.com/repositories/42?x=1",
		"/repos/me/twice":     "307 /repositories/43",
		"/repositories/43":    "301 https://api.github.com/repositories/42",
		"/repos/me/plain":     "301 http://api.github.com/repositories/42",
		"/repos/me/userinfo":  "301 https://x@api.github.com/repositories/42",
		"/repos/me/notdigits": "301 https://api.github.com/repositories/42x",
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Host+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		a := answers[r.URL.Path]
		if code, loc, ok := strings.Cut(a, " "); ok && strings.HasPrefix(code, "30") {
			w.Header().Set("Location", loc)
			n, _ := strconv.Atoi(code)
			w.WriteHeader(n)
			return
		}
		if a == "" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, a)
	}))
	defer srv.Close()
	e := &Egress{Session: "s1", Log: io.Discard, Inject: &Injector{}}
	e.upOnce.Do(func() { // every host is the stand-in, which shows where the proxy went
		e.up = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", srv.Listener.Addr().String())
		}, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	})
	lend := func(repo string) *gitLent {
		return &gitLent{GitLend: GitLend{Host: GitHubAPI, Repo: repo, Ops: []string{"pr"}}, token: "TOKEN"}
	}
	old := lend("me/old")
	id, err := e.repoNodeID(old)
	if err != nil || id != "R_lent" {
		t.Fatalf("the node id of a moved repository: %q, %v", id, err)
	}
	mu.Lock()
	if got := strings.Join(seen, "\n"); got != "api.github.com /repos/me/old token TOKEN\napi.github.com /repositories/42 token TOKEN" {
		t.Errorf("the stand-in saw:\n%s", got)
	}
	seen = nil
	mu.Unlock()
	if why := e.checkRepoIDs(&gitRequest{repoIDs: []string{"R_lent"}, fits: []*gitLent{old}}); why != "" {
		t.Errorf("createPullRequest in the moved repository: %s", why)
	}
	if why := e.checkRepoIDs(&gitRequest{repoIDs: []string{"R_other"}, fits: []*gitLent{old}}); why == "" {
		t.Error("createPullRequest in another repository passed")
	}
	for _, repo := range []string{"me/away", "me/port", "me/sideways", "me/query", "me/twice", "me/plain", "me/userinfo", "me/notdigits"} {
		mu.Lock()
		seen = nil
		mu.Unlock()
		id, err := e.repoNodeID(lend(repo))
		mu.Lock()
		got := seen
		mu.Unlock()
		want := 1
		if repo == "me/twice" {
			want = 2 // the first hop is followed, the second is not
		}
		if err == nil || len(got) != want {
			t.Errorf("%s: node id %q, %v; the stand-in saw %q", repo, id, err, got)
		}
	}
}
