package egress

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"mosaic/internal/credvar"
	"mosaic/internal/journald"
)

// A GitLend is a git host credential lent to a session (--lend-git): for
// one repository on one host, the operations it may be used for. It holds
// names, never the token: it goes on the egress unit's command line.
type GitLend struct {
	Host string   // "host:port"
	Repo string   // "owner/repo", without ".git"
	Ops  []string // of GitOps
}

// GitOps are the operations a git credential may be lent for: fetch
// (clone, fetch, pull), push (a new ref, a fast-forward), force (a
// force-push or a ref's deletion; it implies push), pr (GitHub's REST
// calls for the repository's pull requests, at GitHubAPI).
var GitOps = []string{"fetch", "push", "force", "pr"}

// GitHubAPI is GitHub's REST API, where a lend of a github.com
// repository for pr goes too.
const GitHubAPI = "api.github.com:443"

// Hosts are the hosts the lend's token goes to: its own, and GitHub's API
// for pr.
func (g GitLend) Hosts() []string {
	if slices.Contains(g.Ops, "pr") {
		return []string{g.Host, GitHubAPI}
	}
	return []string{g.Host}
}

// DefaultGitOps are a lend's operations when it names none.
var DefaultGitOps = []string{"fetch", "push"}

// String is the lend as ParseGitLend reads it: https://HOST[:PORT]/OWNER/REPO=OPS.
func (g GitLend) String() string {
	return g.URL() + "=" + strings.Join(g.Ops, ",")
}

// URL is the repository's https URL, the port only when it is not 443.
func (g GitLend) URL() string {
	return "https://" + strings.TrimSuffix(g.Host, ":443") + "/" + g.Repo
}

// may reports whether the lend allows op (force implies push).
func (g GitLend) may(op string) bool {
	return slices.Contains(g.Ops, op) || op == "push" && slices.Contains(g.Ops, "force")
}

// ParseGitLend reads URL[=OPS], URL being https://HOST[:PORT]/OWNER/REPO
// (a trailing .git or / dropped) and OPS of GitOps, comma-separated
// (default DefaultGitOps).
func ParseGitLend(s string) (GitLend, error) {
	u, ops, hasOps := strings.Cut(s, "=")
	rest, ok := strings.CutPrefix(u, "https://")
	if !ok {
		return GitLend{}, fmt.Errorf("--lend-git %q: want https://HOST[:PORT]/OWNER/REPO[=OPS] (an https URL: ssh remotes are --lend-ssh-key's)", s)
	}
	host, path, _ := strings.Cut(rest, "/")
	hp, err := NormalizeHost(host)
	if err != nil {
		return GitLend{}, fmt.Errorf("--lend-git %q: %w", s, err)
	}
	path = strings.TrimSuffix(strings.TrimSuffix(path, "/"), ".git")
	segs := strings.Split(path, "/")
	if len(segs) != 2 || !plainName(segs[0]) || !plainName(segs[1]) {
		return GitLend{}, fmt.Errorf("--lend-git %q: name one repository, https://HOST/OWNER/REPO (letters, digits, '-', '.', '_')", s)
	}
	g := GitLend{Host: hp, Repo: path}
	if !hasOps {
		g.Ops = append(g.Ops, DefaultGitOps...)
		return g, nil
	}
	for _, op := range strings.Split(ops, ",") {
		if !slices.Contains(GitOps, op) {
			return GitLend{}, fmt.Errorf("--lend-git %q: %q is not one of %s", s, op, strings.Join(GitOps, ", "))
		}
		if !slices.Contains(g.Ops, op) {
			g.Ops = append(g.Ops, op)
		}
	}
	if slices.Contains(g.Ops, "pr") && g.Host != "github.com:443" {
		return GitLend{}, fmt.Errorf("--lend-git %q: pr is GitHub's pull requests (a github.com repository)", s)
	}
	return g, nil
}

// plainName is an owner's or a repository's name: letters, digits, '-',
// '.', '_', not a dot segment.
func plainName(s string) bool {
	return s != "" && s != "." && s != ".." && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._") == ""
}

// GitTokenVar names, in the egress unit's environment file, lend i's
// token (what the user's credential helper gave).
func GitTokenVar(i int) string { return "MOSAIC_GIT_TOKEN_" + strconv.Itoa(i) }

// GitUserVar names lend i's user name there.
func GitUserVar(i int) string { return "MOSAIC_GIT_USER_" + strconv.Itoa(i) }

// GitPlaceholderVar names lend i's placeholder there, which the session's
// git sends instead of the token.
func GitPlaceholderVar(i int) string { return "MOSAIC_GIT_PLACEHOLDER_" + strconv.Itoa(i) }

// gitLent is a lend with its values, in the proxy's memory only.
type gitLent struct {
	GitLend
	user, token, placeholder string
}

// gitRequest is what the proxy makes of a request to a git host: the lend
// it uses and the operation, or why it is refused.
type gitRequest struct {
	lend *gitLent
	path string // the request's path, for a refusal's record
	op   string // fetch, push, pr, or "" when unknown
	refs string // a push's updates or a GraphQL request's operations, for the record
	why  string
	// repoIDs are the repositoryIds a GraphQL createPullRequest names:
	// each must be the node id of the repository of one of fits, the
	// lends whose repository the document fits (checkRepoIDs).
	repoIDs []string
	fits    []*gitLent
}

// gitCheck classifies a request to hp, a host a git credential is lent
// for: only git's smart HTTP for a lent repository, for an operation lent,
// passes; a push's commands are read from its body (r.Body is then
// replaced by what was read and the rest).
func (in *Injector) gitCheck(r *http.Request, hp string) gitRequest {
	raw := r.URL.EscapedPath()
	if !pathIsPlain(raw) || raw != sentPath(r.RequestURI) {
		return gitRequest{why: "its path has a dot segment, a path parameter, or an encoded character that has another spelling"}
	}
	if hp == GitHubAPI && raw == "/graphql" {
		return in.graphqlCheck(r)
	}
	if hp == GitHubAPI {
		return in.pullsCheck(r, raw)
	}
	for i := range in.git[hp] {
		l := &in.git[hp][i]
		rest, ok := cutRepo(raw, l.Repo, hp == "github.com:443")
		if !ok {
			continue
		}
		op := ""
		switch {
		case rest == "info/refs" && r.Method == "GET" && r.URL.RawQuery == "service=git-upload-pack":
			op = "fetch"
		case rest == "git-upload-pack" && r.Method == "POST" && r.URL.RawQuery == "":
			op = "fetch"
		case rest == "info/refs" && r.Method == "GET" && r.URL.RawQuery == "service=git-receive-pack":
			op = "push"
		case rest == "git-receive-pack" && r.Method == "POST" && r.URL.RawQuery == "":
			op = "push"
		default:
			return gitRequest{lend: l, path: raw, why: "not a git fetch or push of " + l.Repo + " (only git's smart HTTP is lent)"}
		}
		if !l.may(op) {
			return gitRequest{lend: l, op: op, why: op + " is not lent for " + l.Repo}
		}
		g := gitRequest{lend: l, op: op}
		if rest == "git-receive-pack" && !slices.Contains(l.Ops, "force") {
			g.refs, g.why = checkPush(r)
		}
		return g
	}
	return gitRequest{path: raw, why: "not a repository lent to the session on this host"}
}

// cutRepo returns what follows the repository repo ("owner/repo") in the
// smart HTTP path raw ("/owner/repo.git/..." or "/owner/repo/..."), if
// raw is below it. With fold, repo is matched without case, as GitHub
// names repositories (github.com/Owner/Repo is owner/repo); a git server
// of another host may serve Owner/Repo and owner/repo as two
// repositories, so it is matched exactly. The ".git" is matched exactly
// either way, as before. raw is the escaped path: ASCII, so no other
// letter folds into a name's (the Kelvin sign into k).
func cutRepo(raw, repo string, fold bool) (string, bool) {
	prefix := "/" + repo
	if len(raw) < len(prefix) || !(raw[:len(prefix)] == prefix || fold && strings.EqualFold(raw[:len(prefix)], prefix)) {
		return "", false
	}
	rest := raw[len(prefix):]
	if r, ok := strings.CutPrefix(rest, ".git/"); ok {
		return r, true
	}
	return strings.CutPrefix(rest, "/")
}

// pullsCheck classifies a request to GitHub's API: where pr is lent, a
// GET of a lent repository's pull requests (/repos/OWNER/REPO/pulls[/...])
// and a POST that makes one (/repos/OWNER/REPO/pulls) pass; anything else
// of the API is refused, a POST below a pull request too (a review that
// approves it, which can merge it, or an edit: GitHub takes POST for
// PATCH).
func (in *Injector) pullsCheck(r *http.Request, raw string) gitRequest {
	for i := range in.git[GitHubAPI] {
		l := &in.git[GitHubAPI][i]
		// Without case, as GitHub names repositories (and the GraphQL
		// check compares them).
		prefix := "/repos/" + l.Repo + "/pulls"
		ok := len(raw) >= len(prefix) && strings.EqualFold(raw[:len(prefix)], prefix)
		rest := raw[min(len(prefix), len(raw)):]
		if !ok || rest != "" && !strings.HasPrefix(rest, "/") {
			continue
		}
		if r.Method != "GET" && (r.Method != "POST" || rest != "") {
			return gitRequest{lend: l, op: "pr", path: raw, why: r.Method + " of " + printable(raw) + " (pr lends reading pull requests and making one)"}
		}
		if !l.may("pr") {
			return gitRequest{lend: l, op: "pr", why: "pr is not lent for " + l.Repo}
		}
		return gitRequest{lend: l, op: "pr"}
	}
	return gitRequest{path: raw, why: "not the pull requests of a repository lent to the session"}
}

// checkPush reads a receive-pack request's commands and, for an update of
// an existing ref, its pack: a deletion is refused, and an update that the
// pack does not prove a fast-forward. The body read is put back in front
// of the rest for the relay.
func checkPush(r *http.Request) (refs, why string) {
	var read bytes.Buffer
	body := io.TeeReader(io.LimitReader(r.Body, MaxPushBody+1), &read)
	defer func() { r.Body = readCloser{io.MultiReader(bytes.NewReader(read.Bytes()), r.Body), r.Body} }()
	src := io.Reader(body)
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "":
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return "", "a push whose gzip body does not read: " + err.Error()
		}
		src = io.LimitReader(zr, maxPackInflated)
	default:
		return "", "a push in an encoding the proxy does not read: " + printable(enc)
	}
	br := bufio.NewReader(src)
	cmds, err := readPushCommands(br)
	if err != nil {
		return "", "a push whose commands do not read: " + printable(err.Error())
	}
	var list []string
	var updates []refUpdate
	for _, c := range cmds {
		list = append(list, c.kind()+" "+c.Ref)
		if !strings.HasPrefix(c.Ref, "refs/heads/") && !strings.HasPrefix(c.Ref, "refs/tags/") {
			// refs/replace/ would have the server's git show another
			// history for a commit; refs/notes/ and the like are no push
			// of a branch either.
			return strings.Join(list, ", "), "writes " + printable(c.Ref) + ", not a branch or a tag (force is not lent)"
		}
		switch c.kind() {
		case "delete":
			return strings.Join(list, ", "), "deletes " + printable(c.Ref) + " (force is not lent)"
		case "update":
			updates = append(updates, c)
		}
	}
	refs = printable(strings.Join(list, ", "))
	if len(updates) == 0 {
		return refs, ""
	}
	pack, err := io.ReadAll(br)
	if err != nil {
		return refs, "a push whose pack does not read: " + printable(err.Error())
	}
	if read.Len() > MaxPushBody {
		return refs, fmt.Sprintf("a push over %d MiB, too big to prove a fast-forward (force is not lent)", MaxPushBody>>20)
	}
	commits, err := packCommits(pack)
	if err != nil {
		return refs, "a push whose pack does not read: " + printable(err.Error())
	}
	for _, u := range updates {
		if !fastForward(commits, u.Old, u.New) {
			return refs, "updates " + printable(u.Ref) + " with what is not a fast-forward the pack proves (force is not lent)"
		}
	}
	return refs, ""
}

type readCloser struct {
	io.Reader
	io.Closer
}

// putGit swaps the placeholder for the lend's token in the request's
// Authorization: Basic user:PLACEHOLDER becomes the lend's user:TOKEN;
// a Bearer or token scheme's placeholder is replaced where it stands.
// It reports whether it put the token in.
func (l *gitLent) putGit(h http.Header) bool {
	v := h.Get("Authorization")
	scheme, cred, _ := strings.Cut(v, " ")
	if strings.EqualFold(scheme, "Basic") {
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
		_, pass, ok := strings.Cut(string(b), ":")
		if err != nil || !ok || pass != l.placeholder {
			return false
		}
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(l.user+":"+l.token)))
		return true
	}
	if !strings.Contains(v, l.placeholder) {
		return false
	}
	h.Set("Authorization", strings.ReplaceAll(v, l.placeholder, l.token))
	return true
}

// gitEvent is the audit event of one use of a lent git credential.
func (e *Egress) gitEvent(hp string, g gitRequest) {
	verdict, repo := "allowed", "-"
	if g.why != "" {
		verdict = "refused"
	}
	if g.lend != nil {
		repo = g.lend.URL()
	}
	op := g.op
	if op == "" {
		op = "other"
	}
	msg := fmt.Sprintf("session %s: git %s of %s %s", e.Session, op, repo, verdict)
	if g.lend == nil || g.op == "" {
		msg = fmt.Sprintf("session %s: request to %s%s %s", e.Session, hp, printable(g.path), verdict)
	}
	if g.refs != "" {
		msg += " (" + g.refs + ")"
	}
	if g.why != "" {
		msg += ": " + g.why
	}
	e.logf("%s", strings.TrimPrefix(msg, "session "+e.Session+": "))
	e.audit(journald.GitLendUse, "git-lend-"+verdict, msg, journald.Field{Key: "MOSAIC_HOST", Value: hp},
		journald.Field{Key: "MOSAIC_REPO", Value: repo}, journald.Field{Key: "MOSAIC_OP", Value: op},
		journald.Field{Key: "MOSAIC_REFS", Value: g.refs}, journald.Field{Key: "MOSAIC_VERDICT", Value: verdict},
		journald.Field{Key: "MOSAIC_WHY", Value: g.why})
}

// errNoGitValue is a lend whose values did not arrive.
var errNoGitValue = errors.New("a lent git credential or its placeholder did not arrive (the environment file was gone before the proxy started)")

// SplitGit takes the lent git credentials' variables (GitTokenVar,
// GitUserVar, GitPlaceholderVar) out of a session's secrets: they go to
// its egress proxy only.
func SplitGit(secrets []credvar.Var) (session, proxy []credvar.Var) {
	for _, v := range secrets {
		if strings.HasPrefix(v.Name, "MOSAIC_GIT_") {
			proxy = append(proxy, v)
		} else {
			session = append(session, v)
		}
	}
	return session, proxy
}
