package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gitAttackScript runs inside a session lent me/repo for fetch and push,
// as a hostile agent: with the placeholder its git credential helper
// answers, it sends by hand what git never would. A deletion spelled
// zeros to zeros (which git receive-pack takes for a deletion) plain,
// chunked behind Expect: 100-continue, and gzipped; a history replaced by
// one commit whose parent line, after its author, git does not read as
// its parent (made to look a fast-forward to the proxy); requests for
// me/other through path tricks, an absolute-form target, HTTP/1.0; a
// CONNECT to the host's address in place of its name; the
// placeholder in headers other than Authorization; and, on one TLS
// connection, requests pipelined after an allowed one (one for another
// repository, one absolute-form, one naming another Host).
const gitAttackScript = `
url=$1
base=${url%/me/repo.git}
ph=$(printf 'url=%s\n\n' "$url" | git credential fill | sed -n 's/^password=//p')
[ -n "$ph" ] || echo no-placeholder
auth="Authorization: Basic $(printf 'me:%s' "$ph" | base64 -w0)"
code() { curl -s -o /dev/null -w '%{http_code}' -H "$auth" "$@"; }
z=0000000000000000000000000000000000000000
line="$z $z refs/heads/feature"
{ printf '%04x%s\0report-status\n' $(( ${#line} + 19 )) "$line"; printf 0000; } >/tmp/del
gzip -c /tmp/del >/tmp/del.gz
ct='Content-Type: application/x-git-receive-pack-request'
echo "zero-delete=$(code -H "$ct" --data-binary @/tmp/del "$url/git-receive-pack")"
echo "zero-delete-chunked=$(code -H "$ct" -H 'Transfer-Encoding: chunked' -H 'Expect: 100-continue' --data-binary @/tmp/del "$url/git-receive-pack")"
echo "zero-delete-gzip=$(code -H "$ct" -H 'Content-Encoding: gzip' --data-binary @/tmp/del.gz "$url/git-receive-pack")"
git clone -q "$url" /tmp/r || echo clone=failed
old=$(git -C /tmp/r rev-parse HEAD) tree=$(git -C /tmp/r mktree </dev/null)
new=$(printf 'tree %s\nauthor t <t@t> 1 +0000\ncommitter t <t@t> 1 +0000\nparent %s\n\nrewritten\n' "$tree" "$old" |
	git -C /tmp/r hash-object --literally -t commit -w --stdin)
line="$old $new refs/heads/main"
{ printf '%04x%s\0report-status\n' $(( ${#line} + 19 )) "$line"; printf 0000; printf '%s\n%s\n' "$new" "$tree" | git -C /tmp/r pack-objects --stdout -q; } >/tmp/late
echo "late-parent=$(code -H "$ct" --data-binary @/tmp/late "$url/git-receive-pack")"
q='info/refs?service=git-upload-pack'
for p in "/me/repo.git/../other.git/$q" "/me/repo.git/%2e%2e/other.git/$q" "/me/repo.git/%2E%2E/other.git/$q" \
	"/me/repo.git/..%2fother.git/$q" "/me/repo.git%2f..%2fother.git/$q" "/me/repo.git//../other.git/$q" "//me/other.git/$q" \
	"/me/repo.git/info/refs/../../../other.git/$q" "/me/repo.git/info/refs;/../../../other.git/$q" "/me/repo.git\\..\\other.git/$q" \
	"/me/%72epo.git/../other.git/$q" "/me/repo.git/$q&x=/../../other.git" "/me/repo.git/info/refs%3fservice=git-upload-pack" \
	"/me/repo.git/HEAD" "/me/repo.git/objects/info/packs"; do
	echo "path $p=$(code --path-as-is "$base$p")"
done
echo "absolute-form=$(code --request-target "$base/me/other.git/$q" "$url/$q")"
echo "http1.0=$(code -0 "$base/me/other.git/$q")"
hostport=${base#https://}
echo "connect-ip=$(code -k --connect-to "$hostport:$2:${hostport#*:}" "$url/$q")"; curl -sS -k -o /dev/null --connect-to "$hostport:$2:${hostport#*:}" "$url/$q" 2>&1 | head -3
echo "placeholder-in-headers=$(code -H "X-Token: $ph" -H "Cookie: t=$ph" -H "Proxy-Authorization: Basic $(printf 'me:%s' "$ph" | base64 -w0)" "$url/$q")"
python3 - "$base" "$auth" <<'PY'
import os, re, socket, ssl, sys, urllib.parse
base, auth = sys.argv[1], sys.argv[2]
u, p = urllib.parse.urlsplit(base), urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
s = socket.create_connection((p.hostname, p.port))
s.sendall(f"CONNECT {u.netloc} HTTP/1.1\r\nHost: {u.netloc}\r\n\r\n".encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
t = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"]).wrap_socket(s, server_hostname=u.hostname)
q = "info/refs?service=git-upload-pack"
def req(target, host=u.netloc, last=False):
    return f"GET {target} HTTP/1.1\r\nHost: {host}\r\n{auth}\r\n" + ("Connection: close\r\n" if last else "") + "\r\n"
t.sendall((req("/me/repo.git/" + q) + req("/me/other.git/" + q) + req(base + "/me/other.git/" + q)
    + req("/me/other.git/" + q, "other.mosaic.test", True)).encode())
out = b""
while True:
    b = t.recv(65536)
    if not b:
        break
    out += b
codes = [c.decode() for c in re.findall(rb"HTTP/1\.1 (\d{3}) ", out)]
print("pipelined=" + ",".join(codes))
PY
`

// TestLendGitAttacks: what a hostile agent lent me/repo for fetch and push
// sends by hand gets neither a deletion nor the token's use beyond the
// lent repository's smart HTTP: the zeros-to-zeros deletion is refused
// (plain, chunked, gzipped) and the branch stays; no path trick,
// absolute-form target, pipelined request or Host header gets the token
// put into a request for anything but me/repo; a placeholder in another
// header reaches the server as the placeholder. Checked against the
// build before kind() took a new ID of zeros for a deletion: the plain
// and gzipped zero-delete answered 200 (the chunked one 400, from the
// test server's CGI, after the token was put in) and the server's feature
// branch was gone (git receive-pack: "allowing deletion of corrupt ref");
// and against the build before commitParents read parents as git does:
// late-parent answered 200 and the server's main was the one "rewritten"
// commit.
func TestLendGitAttacks(t *testing.T) {
	n := needTestNet(t)
	caPEM, cert := testCA(t, "mockhost.mosaic.test")
	dir := t.TempDir()
	roots := filepath.Join(dir, "roots.pem")
	must(t, os.WriteFile(roots, caPEM, 0o644))
	token := "ghp_" + strings.Repeat(randomHex(), 5)
	srv := startGitServer(t, n, cert, "me", token)
	url := srv.base + "/me/repo.git"
	hostEnv := credentialStore(t, dir, srv.base, token, roots)
	work := t.TempDir()
	gitEnvOn(t, work, hostEnv, "clone", "-q", url, "c")
	c := filepath.Join(work, "c")
	must(t, os.WriteFile(filepath.Join(c, "f"), []byte("x\n"), 0o644))
	gitOn(t, c, "add", "f")
	gitOn(t, c, "commit", "-qm", "x")
	gitEnvOn(t, c, hostEnv, "push", "-q", "origin", "HEAD:main", "HEAD:feature")
	gitEnvOn(t, c, hostEnv, "push", "-q", srv.base+"/me/other.git", "HEAD:main")
	srv.mu.Lock()
	srv.granted = nil
	srv.mu.Unlock()

	name := sessionName(t)
	env := append(hostEnv, "MOSAIC_EGRESS_TEST_ROOTS="+roots)
	r := mosaicWith(t, env, "", "run", "--name", name, "--network", "allow", "--allow-host", n+".0/24", "-w", workspace(t),
		"--lend-git", url, "--", "bash", "-c", gitAttackScript, "bash", url, n+".1")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("the session:\n%s", r.stdout)
	for _, want := range []string{"zero-delete=403", "zero-delete-chunked=403", "zero-delete-gzip=403", "late-parent=403", "placeholder-in-headers=200", "pipelined=200,403,403,403"} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("want %s in:\n%s", want, r.stdout)
		}
	}
	// A CONNECT to the host's address is refused (the proxy answers 403;
	// were it tunneled, the server would see the placeholder, a 401).
	if !strings.Contains(r.stdout, "connect-ip=") || strings.Contains(r.stdout, "connect-ip=200") {
		t.Errorf("want connect-ip other than 200 in:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "no-placeholder") || strings.Count(r.stdout, "path /") != 15 {
		t.Errorf("the script did not try every path:\n%s", r.stdout)
	}
	if got := gitOn(t, filepath.Join(srv.root, "me/repo.git"), "for-each-ref", "--format=%(refname)"); !strings.Contains(got, "refs/heads/feature") {
		t.Errorf("the server's feature branch was deleted: refs %q", got)
	}
	if got := gitOn(t, filepath.Join(srv.root, "me/repo.git"), "log", "--format=%s", "main"); got != "x" {
		t.Errorf("the server's main was rewritten: %q", got)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, p := range srv.granted {
		if p != "/me/repo.git/info/refs" && p != "/me/repo.git/git-upload-pack" {
			t.Errorf("the token authorized %s", p)
		}
	}
	if len(srv.granted) == 0 {
		t.Error("the token authorized nothing: the allowed requests did not reach the server")
	}
	if len(srv.leaks) > 0 {
		t.Errorf("the token reached the server in %v", srv.leaks)
	}
}
