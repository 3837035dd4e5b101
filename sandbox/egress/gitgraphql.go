package egress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// GitHub's GraphQL API, which gh pr create speaks: with pr lent, a
// request there gets the token only when its document does nothing but
// what opening a pull request on the lent repository needs (what gh
// sends: api/queries_repo.go's RepositoryInfo and RepositoryNetwork,
// pkg/cmd/pr/shared/finder.go's PullRequestForBranch,
// api/queries_pr.go's PullRequestCreate, the viewer's login).
const (
	// MaxGraphQLBody bounds a GraphQL request the proxy reads to check
	// it: gh's documents are a few KiB; a pull request's body (GitHub
	// takes 65536 characters) rides in the variables.
	MaxGraphQLBody = 1 << 20
	// maxGraphQLTokens bounds the document's tokens (the parser stops
	// there); gh's longest, RepositoryNetwork of five remotes, has about
	// 300.
	maxGraphQLTokens = 4000
	// maxGraphQLJSONTokens bounds the body's JSON tokens: gh's have a
	// few dozen (a pull request's body is one), and each costs the
	// proxy's reader an allocation (a body of a MiB of zeros in a list
	// took 300-470 ms and 53 MB to read).
	maxGraphQLJSONTokens = 10000
	// maxFragmentDepth bounds fragments spread in fragments.
	maxFragmentDepth = 16
)

// graphqlCall is what the proxy reads of an allowed GraphQL request: its
// operations, for the record, and the repositoryId each createPullRequest
// names, which the caller holds against the lent repository's node id.
type graphqlCall struct {
	what    string
	repoIDs []string
}

// checkGraphQL reads a GraphQL request's body (a JSON object of query,
// variables and operationName; no key twice at any depth, valid UTF-8)
// and checks every operation of its document for the repository
// "owner/name": a query's root fields may be repository(owner:, name:)
// of that repository only (literals or variables, compared without
// case, as GitHub does) and viewer (its scalar fields only); a
// mutation's, createPullRequest(input:) only; no subscription; below
// them, only the object fields of gqlShapes. An alias
// hides no field, a fragment is checked where it is spread, a directive
// is ignored (the field counts even if skipped). It returns why it
// refuses, or "".
func checkGraphQL(body []byte, repo string) (graphqlCall, string) {
	query, vars, why := decodeGraphQL(body)
	if why != "" {
		return graphqlCall{}, why
	}
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: query}, maxGraphQLTokens)
	if err != nil {
		return graphqlCall{}, "a GraphQL document that does not parse: " + printable(err.Error())
	}
	if len(doc.Operations) == 0 {
		return graphqlCall{}, "a GraphQL document with no operation"
	}
	// A fragment defined twice: which one would GitHub spread?
	names := map[string]bool{}
	for _, f := range doc.Fragments {
		if names[f.Name] {
			return graphqlCall{}, "GraphQL fragment " + printable(f.Name) + " defined twice"
		}
		names[f.Name] = true
	}
	owner, name, _ := strings.Cut(repo, "/")
	c := &gqlCheck{doc: doc, vars: vars, owner: owner, name: name, done: map[string]string{}}
	var what []string
	for _, op := range doc.Operations {
		var why string
		switch op.Operation {
		case ast.Query:
			why = c.fields(op.SelectionSet, "query", 0)
		case ast.Mutation:
			why = c.fields(op.SelectionSet, "mutation", 0)
		default:
			why = "a GraphQL " + string(op.Operation) + " (pr lends queries of the repository and createPullRequest)"
		}
		if why != "" {
			return graphqlCall{}, why
		}
		what = append(what, strings.TrimSpace(string(op.Operation)+" "+op.Name))
	}
	return graphqlCall{what: printable("graphql " + strings.Join(what, ", ")), repoIDs: c.repoIDs}, ""
}

// decodeGraphQL reads the request's JSON: the document and its
// variables. A key twice (which parser wins?), a key of another name or
// spelling, a batch (an array) or bytes that are not UTF-8 are refused:
// what is checked must be what GitHub runs.
func decodeGraphQL(body []byte) (string, map[string]any, string) {
	if !utf8.Valid(body) {
		return "", nil, "a GraphQL request that is not UTF-8"
	}
	if err := jsonKeysOnce(body); err != nil {
		return "", nil, "a GraphQL request that does not read: " + printable(err.Error())
	}
	var req map[string]any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&req); err != nil || req == nil {
		return "", nil, "a GraphQL request that is not a JSON object"
	}
	for k := range req {
		if k != "query" && k != "variables" && k != "operationName" {
			return "", nil, "a GraphQL request with " + printable(fmt.Sprintf("%q", k)) + " (only query, variables and operationName are read)"
		}
	}
	query, ok := req["query"].(string)
	if !ok {
		return "", nil, "a GraphQL request without its query"
	}
	vars, ok := req["variables"].(map[string]any)
	if !ok && req["variables"] != nil {
		return "", nil, "a GraphQL request whose variables are not an object"
	}
	return query, vars, ""
}

// jsonKeysOnce reports an object of b with a key twice, at any depth,
// and anything after the first value.
func jsonKeysOnce(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	budget := maxGraphQLJSONTokens
	if err := jsonValueKeysOnce(d, &budget); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("more after the JSON object")
	}
	return nil
}

// jsonValueKeysOnce reads one value of d, counting its tokens down from
// budget.
func jsonValueKeysOnce(d *json.Decoder, budget *int) error {
	if *budget--; *budget < 0 {
		return fmt.Errorf("over %d JSON tokens", maxGraphQLJSONTokens)
	}
	t, err := d.Token()
	if err != nil {
		return err
	}
	switch t {
	case json.Delim('{'):
		seen := map[string]bool{}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return err
			}
			key, _ := k.(string)
			if seen[key] {
				return fmt.Errorf("key %q twice", key)
			}
			seen[key] = true
			if err := jsonValueKeysOnce(d, budget); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for d.More() {
			if err := jsonValueKeysOnce(d, budget); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	_, err = d.Token() // the closing delimiter
	return err
}

// gqlCheck is one document's check for one repository.
type gqlCheck struct {
	doc         *ast.QueryDocument
	vars        map[string]any
	owner, name string
	repoIDs     []string
	done        map[string]string // "level fragment" -> its verdict ("" or why), or "…" while checked
}

// fields checks a selection set's fields at level (field's), through its
// inline fragments and the fragments it spreads (each checked once per
// level, a cycle refused).
func (c *gqlCheck) fields(set ast.SelectionSet, level string, depth int) string {
	if depth > maxFragmentDepth {
		return "GraphQL fragments nested too deep"
	}
	for _, s := range set {
		var why string
		switch s := s.(type) {
		case *ast.Field:
			why = c.field(s, level)
		case *ast.InlineFragment:
			why = c.fields(s.SelectionSet, level, depth+1)
		case *ast.FragmentSpread:
			why = c.spread(s.Name, level, depth)
		}
		if why != "" {
			return why
		}
	}
	return ""
}

func (c *gqlCheck) spread(name, level string, depth int) string {
	key := level + " " + name
	if why, ok := c.done[key]; ok {
		if why == "…" {
			return "GraphQL fragment " + printable(name) + " spreads itself"
		}
		return why
	}
	f := c.doc.Fragments.ForName(name)
	if f == nil {
		return "GraphQL fragment " + printable(name) + " is spread but not defined"
	}
	c.done[key] = "…"
	why := c.fields(f.SelectionSet, level, depth+1)
	c.done[key] = why
	return why
}

// gqlShapes are, below a root field, the object fields (those with a
// selection set) each level may read and the level each leads to; a
// scalar (no selection set) is read anywhere. What gh pr create reads of
// the lent repository (its owner, default branch, parent, pull requests
// and templates, a pull request's head and author): no object field that
// leads on to another repository's contents or to the owner's other
// repositories (owner { repositories }, object(expression:), a pull
// request's repository, parent { parent }).
var gqlShapes = map[string]map[string]string{
	"repository":   {"owner": "scalars", "defaultBranchRef": "scalars", "parent": "parent", "pullRequests": "pullRequests", "pullRequestTemplates": "scalars"},
	"parent":       {"owner": "scalars", "defaultBranchRef": "scalars"},
	"pullRequests": {"nodes": "pullRequest", "edges": "edges", "pageInfo": "scalars"},
	"edges":        {"node": "pullRequest"},
	"pullRequest":  {"headRepositoryOwner": "scalars", "headRepository": "scalars", "author": "scalars"},
	"payload":      {"pullRequest": "pullRequest"},
	"scalars":      {},
}

// field checks one field at level: an operation's root ("query",
// "mutation") or a level of gqlShapes.
func (c *gqlCheck) field(f *ast.Field, level string) string {
	switch {
	case level == "query" && f.Name == "repository":
		if why := c.repository(f); why != "" {
			return why
		}
		return c.fields(f.SelectionSet, "repository", 0)
	case level == "query" && f.Name == "viewer":
		if len(f.Arguments) > 0 {
			return "viewer with arguments"
		}
		return c.fields(f.SelectionSet, "scalars", 0)
	case level == "query":
		return "reads " + printable(f.Name) + " (a query under pr may read only repository(owner, name) of the lent repository and viewer)"
	case level == "mutation" && f.Name == "createPullRequest":
		if why := c.createPullRequest(f); why != "" {
			return why
		}
		return c.fields(f.SelectionSet, "payload", 0)
	case level == "mutation":
		return "runs the mutation " + printable(f.Name) + " (pr lends only createPullRequest)"
	case len(f.SelectionSet) == 0:
		return ""
	}
	next, ok := gqlShapes[level][f.Name]
	if !ok {
		return "reads " + printable(f.Name) + " { ... } in " + level + " (pr lends what opening a pull request reads of the lent repository)"
	}
	return c.fields(f.SelectionSet, next, 0)
}

// repository checks repository(owner:, name:): exactly those arguments,
// naming the lent repository.
func (c *gqlCheck) repository(f *ast.Field) string {
	owner, why1 := c.stringArg(f.Arguments, "owner")
	name, why2 := c.stringArg(f.Arguments, "name")
	if why1 != "" || why2 != "" {
		return "repository(owner:, name:) that does not read: " + strings.TrimSpace(why1+" "+why2)
	}
	if len(f.Arguments) != 2 {
		return "repository with arguments other than owner and name"
	}
	if !plainName(owner) || !plainName(name) || !strings.EqualFold(owner, c.owner) || !strings.EqualFold(name, c.name) {
		return "reads repository " + printable(owner+"/"+name) + ", not the lent " + c.owner + "/" + c.name
	}
	return ""
}

// createPullRequest checks createPullRequest(input:) and keeps the
// input's repositoryId.
func (c *gqlCheck) createPullRequest(f *ast.Field) string {
	if len(f.Arguments) != 1 || f.Arguments[0].Name != "input" {
		return "createPullRequest with arguments other than input"
	}
	v := f.Arguments[0].Value
	var id any
	switch v.Kind {
	case ast.Variable:
		in, ok := c.vars[v.Raw].(map[string]any)
		if !ok {
			return "createPullRequest whose input variable is not an object"
		}
		id = in["repositoryId"]
	case ast.ObjectValue:
		var ids []*ast.ChildValue
		for _, ch := range v.Children {
			if ch.Name == "repositoryId" {
				ids = append(ids, ch)
			}
		}
		if len(ids) != 1 {
			return "createPullRequest whose input does not name one repositoryId"
		}
		id = c.value(ids[0].Value)
	default:
		return "createPullRequest whose input is not an object"
	}
	s, ok := id.(string)
	if !ok || s == "" {
		return "createPullRequest without a repositoryId"
	}
	c.repoIDs = append(c.repoIDs, s)
	return ""
}

// stringArg is the string argument name of args (a literal or a
// variable), or why not.
func (c *gqlCheck) stringArg(args ast.ArgumentList, name string) (string, string) {
	var found *ast.Argument
	for _, a := range args {
		if a.Name == name {
			if found != nil {
				return "", name + " twice"
			}
			found = a
		}
	}
	if found == nil {
		return "", "no " + name
	}
	s, ok := c.value(found.Value).(string)
	if !ok {
		return "", name + " is not a string"
	}
	return s, ""
}

// value is a string literal's or a variable's value (from the request's
// variables: a variable left to its default is no value), else nil.
func (c *gqlCheck) value(v *ast.Value) any {
	switch v.Kind {
	case ast.StringValue, ast.BlockValue:
		return v.Raw
	case ast.Variable:
		return c.vars[v.Raw]
	}
	return nil
}

// graphqlCheck classifies a request to GitHub's GraphQL endpoint: a POST
// of /graphql whose document checkGraphQL allows for a repository lent
// for pr takes that lend (the first whose repository fits); the body read
// is put back for the relay. The weakened test build takes every
// GraphQL request for the first lend's, so that the rig test is first
// shown to fail.
func (in *Injector) graphqlCheck(r *http.Request) gitRequest {
	var lends []*gitLent
	for i := range in.git[GitHubAPI] {
		if l := &in.git[GitHubAPI][i]; l.may("pr") {
			lends = append(lends, l)
		}
	}
	if len(lends) == 0 {
		return gitRequest{path: "/graphql", why: "pr is not lent for any repository"}
	}
	if r.Method != "POST" || r.URL.RawQuery != "" {
		return gitRequest{lend: lends[0], op: "pr", path: "/graphql", why: r.Method + " of /graphql with a query string (pr lends GraphQL POSTs of a JSON body)"}
	}
	if Weakened {
		return gitRequest{lend: lends[0], op: "pr", refs: "graphql, unchecked (weakened build)"}
	}
	body, why := readGraphQLBody(r)
	if why != "" {
		return gitRequest{lend: lends[0], op: "pr", why: why}
	}
	var first string
	var g gitRequest
	for _, l := range lends {
		call, why := checkGraphQL(body, l.Repo)
		switch {
		case why == "" && g.lend == nil:
			g = gitRequest{lend: l, op: "pr", refs: call.what, repoIDs: call.repoIDs, fits: []*gitLent{l}}
		case why == "":
			g.fits = append(g.fits, l)
		case first == "":
			first = why
		}
	}
	if g.lend == nil {
		return gitRequest{lend: lends[0], op: "pr", refs: "graphql", why: first}
	}
	return g
}

// readGraphQLBody reads a GraphQL request's body, up to MaxGraphQLBody,
// and puts it back for the relay: JSON, in no content encoding.
func readGraphQLBody(r *http.Request) ([]byte, string) {
	if enc := r.Header.Get("Content-Encoding"); enc != "" {
		return nil, "a GraphQL request in an encoding the proxy does not read: " + printable(enc)
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, "a GraphQL request that is not application/json"
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxGraphQLBody+1))
	r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil {
		return nil, "a GraphQL request whose body does not read: " + printable(err.Error())
	}
	if len(body) > MaxGraphQLBody {
		return nil, fmt.Sprintf("a GraphQL request over %d KiB", MaxGraphQLBody>>10)
	}
	return body, ""
}

// checkRepoIDs is why a createPullRequest is refused: a repositoryId
// that is not the node id of a lent repository the document fits, or
// those ids not known. The lend whose repository it is is the one whose
// token goes in (g.lend).
func (e *Egress) checkRepoIDs(g *gitRequest) string {
	var why []string
	for _, l := range g.fits {
		id, err := e.repoNodeID(l)
		if err != nil {
			why = append(why, "the node id of "+l.Repo+" did not come from GitHub: "+printable(err.Error()))
			continue
		}
		if !slices.ContainsFunc(g.repoIDs, func(got string) bool { return got != id }) {
			g.lend = l
			return ""
		}
		why = append(why, l.Repo+"'s is "+id)
	}
	return "createPullRequest in repository " + printable(strings.Join(g.repoIDs, ", ")) + ", not a lent one (" + strings.Join(why, "; ") + ")"
}

// repoNodeID is the lent repository's GraphQL node id, which a
// createPullRequest must name: asked of GitHub once, with the token
// (GET /repos/OWNER/REPO's node_id), and kept. Asked rather than read
// from an answer the proxy let through: the proxy reads no answer (their
// encodings, aliases and fragments would decide which "id" is the
// repository's), and the mutation may come first. A repository renamed or
// moved answers with a redirect to /repositories/ID on the API, which is
// followed once (movedTo): the node id is then the repository's that
// GitHub names (its full_name goes in the audit event), whatever name
// was typed.
func (e *Egress) repoNodeID(l *gitLent) (string, error) {
	in := e.Inject
	in.mu.Lock()
	id, ok := in.nodeIDs[strings.ToLower(l.Repo)]
	in.mu.Unlock()
	if ok {
		return id, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := "/repos/" + l.Repo
	resp, err := e.apiGet(ctx, l, path)
	if err != nil {
		return "", err
	}
	if to, moved, err := movedTo(resp); moved {
		resp.Body.Close()
		if err != nil {
			return "", fmt.Errorf("GET %s: %w", path, err)
		}
		if resp, err = e.apiGet(ctx, l, to); err != nil {
			return "", err
		}
		path += " (moved to " + to + ")"
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	var v struct {
		NodeID   string `json:"node_id"`
		FullName string `json:"full_name"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v); err != nil || v.NodeID == "" {
		return "", fmt.Errorf("GET %s: no node_id in its answer", path)
	}
	// The proxy's own use of the token is an audit event too.
	e.gitEvent(GitHubAPI, gitRequest{lend: l, op: "pr", refs: "GET " + path + " by the proxy: node id " + printable(v.NodeID) + " of " + printable(v.FullName)})
	in.mu.Lock()
	if in.nodeIDs == nil {
		in.nodeIDs = map[string]string{}
	}
	in.nodeIDs[strings.ToLower(l.Repo)] = v.NodeID
	in.mu.Unlock()
	return v.NodeID, nil
}

// apiGet asks GitHub's API for path with l's token, following no redirect.
func (e *Egress) apiGet(ctx context.Context, l *gitLent, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "https://"+strings.TrimSuffix(GitHubAPI, ":443")+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("User-Agent", "mosaic-egress")
	req.Header.Set("Authorization", "token "+l.token)
	return e.upstream().RoundTrip(req)
}

// movedTo reads resp, GitHub's answer to GET /repos/OWNER/REPO: moved
// says it is a redirect (a renamed or transferred repository), to is
// where, and err why it is not followed: only a path /repositories/ID on
// the API itself is (what GitHub answers), so the token goes to no other
// host and to nothing but a repository's record.
func movedTo(resp *http.Response) (to string, moved bool, err error) {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return "", false, nil
	}
	loc := resp.Header.Get("Location")
	u, err := resp.Request.URL.Parse(loc)
	if err != nil {
		return "", true, fmt.Errorf("%s to %q, which does not parse", resp.Status, printable(loc))
	}
	id, ok := strings.CutPrefix(u.EscapedPath(), "/repositories/")
	api := strings.EqualFold(u.Hostname(), strings.TrimSuffix(GitHubAPI, ":443")) && (u.Port() == "" || u.Port() == "443")
	if u.Scheme != "https" || u.User != nil || u.Opaque != "" || !api || u.RawQuery != "" || u.Fragment != "" ||
		!ok || id == "" || len(id) > 20 || strings.Trim(id, "0123456789") != "" {
		return "", true, fmt.Errorf("%s to %s, not a repository of GitHub's API (https://api.github.com/repositories/ID): not followed", resp.Status, printable(loc))
	}
	return "/repositories/" + id, true, nil
}
