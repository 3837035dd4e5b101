package credentials

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"mosaic/internal/credvar"
	"mosaic/internal/errcode"
	"mosaic/internal/sessionfile"
)

// decodeDoubleQuoted parses one NAME="VALUE" line the way systemd's
// environment-file parser (src/basic/env-file.c) does inside double quotes:
// a backslash before one of \ " ` $ yields that character, before a newline
// continues the line, and before anything else is kept with the character.
func decodeDoubleQuoted(line string) (name, value string, err error) {
	name, rest, ok := strings.Cut(line, "=")
	if !ok || !strings.HasPrefix(rest, `"`) {
		return "", "", fmt.Errorf("not NAME=\"...\": %q", line)
	}
	var b strings.Builder
	esc := false
	for i, r := range rest[1:] {
		switch {
		case esc:
			esc = false
			if !strings.ContainsRune("\\\"`$", r) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		case r == '\\':
			esc = true
		case r == '"':
			if i != len(rest)-2 {
				return "", "", fmt.Errorf("text after the closing quote in %q", line)
			}
			return name, b.String(), nil
		default:
			b.WriteRune(r)
		}
	}
	return "", "", fmt.Errorf("no closing quote in %q", line)
}

func roundTrip(t *testing.T, value string) {
	t.Helper()
	out := string(Encode([]credvar.Var{{Name: "K", Value: value}}))
	if !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("Encode(%q) = %q: want one line", value, out)
	}
	name, got, err := decodeDoubleQuoted(strings.TrimSuffix(out, "\n"))
	if err != nil || name != "K" || got != value {
		t.Fatalf("round trip of %q: got %q, %v (encoded %q)", value, got, err, out)
	}
}

var tricky = []string{
	``, `plain`, `a b`, `  lead and trail  `, `runs    of   spaces`, `"double"`, `'single'`, `back\slash`, `\\`, `\"`,
	`$HOME`, `${HOME}`, "`cmd`", `#not a comment`, `a=b=c`, `é ü 日本 🔑`, `;|&<>(){}*?!~`, `\n literal`, `ends with \`,
}

func TestEncodeRoundTrip(t *testing.T) {
	for _, v := range tricky {
		if err := ValidateValue("K", v, "test"); err != nil {
			t.Errorf("ValidateValue(%q) = %v", v, err)
		}
		roundTrip(t, v)
	}
}

func FuzzEncode(f *testing.F) {
	for _, v := range tricky {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if ValidateValue("K", v, "fuzz") != nil {
			return
		}
		roundTrip(t, v)
	})
}

func TestValidateValueRefuses(t *testing.T) {
	for _, v := range []string{"a\nb", "a\x00b", "tab\there", "\x1b[31m", "del\x7f", string([]byte{0xff, 0xfe}), strings.Repeat("x", maxValue+1)} {
		err := ValidateValue("K", v, "test")
		var e *errcode.Error
		if !errors.As(err, &e) || e.Code != "credential-invalid" || e.Exit != errcode.ExitBadInput {
			t.Errorf("ValidateValue(%q) = %v, want credential-invalid", v, err)
		}
		if err != nil && utf8.ValidString(v) && len(v) > 3 && strings.Contains(err.Error(), v) {
			t.Errorf("the message shows the value: %v", err)
		}
	}
}

func TestValidateName(t *testing.T) {
	for name, ok := range map[string]bool{"A": true, "_x1": true, "ANTHROPIC_API_KEY": true, "1A": false, "A-B": false, "": false,
		"A B": false, "HOME": false, "PATH": false, "MOSAIC_X": false, "TMPDIR": false} {
		if err := credvar.ValidateName(name); (err == nil) != ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestVarNeverPrintsItsValue(t *testing.T) {
	v := credvar.Var{Name: "K", Value: "s3cret"}
	for _, s := range []string{fmt.Sprint(v), fmt.Sprintf("%v %+v %#v %s", v, v, v, v), fmt.Sprint([]credvar.Var{v})} {
		if strings.Contains(s, "s3cret") {
			t.Errorf("printed %q", s)
		}
	}
}

func writeFile(t *testing.T, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadEnvFile(t *testing.T) {
	p := writeFile(t, "a.env", "# comment\n\nA=1\nexport B=two words\nC=\"quoted # x\"\nD='single'\nE=\n", 0o600)
	vars, err := ReadEnvFile(p)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(vars))
	for i, v := range vars {
		got[i] = v.Name + "=" + v.Value
	}
	want := []string{"A=1", "B=two words", "C=quoted # x", "D=single", "E="}
	if !slices.Equal(got, want) {
		t.Errorf("ReadEnvFile = %q, want %q", got, want)
	}
	if _, err := ReadEnvFile(writeFile(t, "ro.env", "A=1\n", 0o400)); err != nil {
		t.Errorf("mode 0400 refused: %v", err)
	}
	for mode, code := range map[os.FileMode]string{0o644: "credential-file-insecure", 0o640: "credential-file-insecure", 0o604: "credential-file-insecure"} {
		_, err := ReadEnvFile(writeFile(t, "x.env", "A=1\n", mode))
		var e *errcode.Error
		if !errors.As(err, &e) || e.Code != code || e.Exit == errcode.ExitBadInput {
			t.Errorf("mode %o: %v, want refusal %s", mode, err, code)
		}
	}
	for _, bad := range []string{"no equals\n", "1A=x\n", "HOME=x\n", "A=x\ty\n"} {
		_, err := ReadEnvFile(writeFile(t, "bad.env", bad, 0o600))
		var e *errcode.Error
		if !errors.As(err, &e) || e.Code != "credential-invalid" {
			t.Errorf("%q: %v, want credential-invalid", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "x\ty") {
			t.Errorf("the message shows the value: %v", err)
		}
	}
	if _, err := ReadEnvFile(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing file was read")
	}
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, "s.env", "ANTHROPIC_API_KEY=from-file\nEXTRA=e\n", 0o600)
	for _, tc := range []struct {
		label string
		req   Request
		env   map[string]string
		names []string
		code  string
	}{
		{"claude from env, first set wins", Request{Profile: "claude-code"},
			map[string]string{"CLAUDE_CODE_OAUTH_TOKEN": "t", "ANTHROPIC_API_KEY": "k"}, []string{"CLAUDE_CODE_OAUTH_TOKEN"}, ""},
		{"claude picked from the command", Request{Command: []string{"/usr/local/bin/claude"}},
			map[string]string{"ANTHROPIC_API_KEY": "k"}, []string{"ANTHROPIC_API_KEY"}, ""},
		{"a gateway's token; its URL is not a secret", Request{Profile: "claude-code"},
			map[string]string{"ANTHROPIC_AUTH_TOKEN": "t", "ANTHROPIC_BASE_URL": "https://gw.example"}, []string{"ANTHROPIC_AUTH_TOKEN"}, ""},
		{"a bad endpoint URL", Request{Profile: "claude-code"},
			map[string]string{"ANTHROPIC_API_KEY": "t", "ANTHROPIC_BASE_URL": "u"}, nil, "bad-env"},
		{"codex's OPENAI_API_KEY also as CODEX_API_KEY", Request{Profile: "codex"},
			map[string]string{"OPENAI_API_KEY": "o"}, []string{"OPENAI_API_KEY", "CODEX_API_KEY"}, ""},
		{"no key for --version", Request{Command: []string{"claude", "--version"}}, nil, nil, ""},
		{"no key to sign in", Request{Command: []string{"codex"}, SignIn: true}, nil, nil, ""},
		{"a key for anything else", Request{Command: []string{"claude", "-p", "--version"}}, nil, nil, "no-session-credential"},
		{"--env of a credential's name", Request{Profile: "codex", Env: []string{"CODEX_API_KEY=x"}},
			map[string]string{"CODEX_API_KEY": "c"}, nil, "bad-env"},
		{"--pass-env unset", Request{Command: []string{"sh"}, PassEnv: []string{"NOPE"}}, nil, nil, "bad-env"},
		{"--env not NAME=VALUE", Request{Command: []string{"sh"}, Env: []string{"NOPE"}}, nil, nil, "bad-env"},
		{"env file before environment", Request{Profile: "claude-code", EnvFiles: []string{file}},
			map[string]string{"ANTHROPIC_API_KEY": "from-env"}, []string{"ANTHROPIC_API_KEY", "EXTRA"}, ""},
		{"codex", Request{Profile: "codex"}, map[string]string{"CODEX_API_KEY": "c"}, []string{"CODEX_API_KEY"}, ""},
		{"generic needs nothing", Request{Command: []string{"sh"}}, map[string]string{"ANTHROPIC_API_KEY": "k"}, nil, ""},
		{"--credential", Request{Credentials: []string{"TOK"}, Command: []string{"sh"}}, map[string]string{"TOK": "v"}, []string{"TOK"}, ""},
		{"--credential unset", Request{Credentials: []string{"TOK"}, Command: []string{"sh"}}, nil, nil, "no-session-credential"},
		{"--credential with newline", Request{Credentials: []string{"TOK"}, Command: []string{"sh"}}, map[string]string{"TOK": "a\nb"}, nil, "credential-invalid"},
		{"--credential bad name", Request{Credentials: []string{"A-B"}, Command: []string{"sh"}}, nil, nil, "credential-invalid"},
		{"unknown profile", Request{Profile: "nope"}, nil, nil, "unknown-profile"},
	} {
		t.Run(tc.label, func(t *testing.T) {
			tc.req.ProfileDir = dir
			tc.req.LookupEnv = env(tc.env)
			g, err := Resolve(tc.req)
			if tc.code != "" {
				var e *errcode.Error
				if !errors.As(err, &e) || e.Code != tc.code {
					t.Fatalf("Resolve = %v, want %s", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(g.Names(), tc.names) {
				t.Errorf("names %v, want %v", g.Names(), tc.names)
			}
		})
	}
	g, _ := Resolve(Request{Profile: "claude-code", EnvFiles: []string{file}, ProfileDir: dir, LookupEnv: env(map[string]string{"ANTHROPIC_API_KEY": "from-env", "ANTHROPIC_MODEL": "m"})})
	if g.Secrets[0].Value != "from-file" || !slices.Contains(g.PassEnv, "ANTHROPIC_MODEL=m") || !slices.Contains(g.PassEnv, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1") {
		t.Errorf("grant %v pass %v: want the file's value and the model passed", g.Secrets, g.PassEnv)
	}
	_, err := Resolve(Request{Profile: "claude-code", EnvFiles: []string{file + ".none"}, ProfileDir: dir, LookupEnv: env(nil)})
	if err == nil {
		t.Error("a missing --env-file was accepted")
	}
	_, err = Resolve(Request{Profile: "claude-code", ProfileDir: dir, LookupEnv: env(nil)})
	for _, want := range []string{"CLAUDE_CODE_OAUTH_TOKEN | ANTHROPIC_API_KEY | ANTHROPIC_AUTH_TOKEN", "your environment", "--sign-in"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %v lacks %q", err, want)
		}
	}
}

// Issue 16: the non-secret variables, the endpoints' hosts and the
// arguments an agent reads its endpoint from.
func TestPlainEnvironment(t *testing.T) {
	dir := t.TempDir()
	g, err := Resolve(Request{Profile: "codex", ProfileDir: dir, Command: []string{"/opt/bin/codex", "exec", "hi"},
		Env: []string{"A=1", "CLAUDE_X=2", "A=3"}, PassEnv: []string{"HOSTVAR"},
		LookupEnv: env(map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://localhost:11434/v1", "HOSTVAR": "h"})})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"A=3", "CLAUDE_X=2", "HOSTVAR=h", "OPENAI_BASE_URL=http://localhost:11434/v1"} {
		if !slices.Contains(g.PassEnv, want) {
			t.Errorf("pass %v lacks %s", g.PassEnv, want)
		}
	}
	if !slices.Equal(g.Allow, []string{"localhost:11434"}) || len(g.Notes) != 1 || !strings.Contains(g.Notes[0], "localhost:11434") {
		t.Errorf("allow %v notes %v: want the endpoint's host, said", g.Allow, g.Notes)
	}
	if want := []string{"-c", "analytics.enabled=false", "-c", "features.plugins=false", "-c", "check_for_update_on_startup=false",
		"-c", `model_providers.mosaic={name="mosaic",base_url="http://localhost:11434/v1",env_key="CODEX_API_KEY",wire_api="responses",supports_websockets=false}`,
		"-c", "model_provider=mosaic"}; !slices.Equal(g.Args, want) {
		t.Errorf("args %q, want %q", g.Args, want)
	}
	g, _ = Resolve(Request{Profile: "codex", ProfileDir: dir, Command: []string{"bash"}, LookupEnv: env(map[string]string{"CODEX_API_KEY": "k"})})
	if len(g.Args) != 0 {
		t.Errorf("args %q for a command that is not the profile's binary", g.Args)
	}
	for _, url := range []string{"https://gw.example.com/v1", "https://gw.example.com:8443", "http://127.0.0.1:8080"} {
		h, err := EndpointHost(url)
		want := map[string]string{"https://gw.example.com/v1": "gw.example.com:443", "https://gw.example.com:8443": "gw.example.com:8443", "http://127.0.0.1:8080": "127.0.0.1:8080"}[url]
		if err != nil || h != want {
			t.Errorf("EndpointHost(%s) = %s, %v; want %s", url, h, err, want)
		}
	}
}

func TestUserProfiles(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "myagent.conf"), []byte("[Profile]\nDescription=Mine\nBinary=myagent\nCredentialSet=MY_KEY\nCredentialSet=MY_TOKEN MY_URL\nPassEnvironment=MY_MODEL\nReadOnlyPaths=/opt/myagent\nSandbox=landlock\nWorkspace=clone\nAsk=yes\nLendGit=https://git.example/me/a=fetch\nLendGit=https://git.example/me/b\nLendSSHKey=SHA256:k=git.example,gh.example /home/me/.ssh/id.pub=git.example\nLendSSHSign=SHA256:s\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "codex.conf"), []byte("[Profile]\nBinary=codex\nCredentialSet=ONLY_THIS\n"), 0o600)
	all, broken := Profiles(dir)
	if len(broken) > 0 {
		t.Fatal(broken)
	}
	byName := map[string]Profile{}
	for _, p := range all {
		byName[p.Name] = p
	}
	mine := byName["myagent"]
	if mine.Binary != "myagent" || len(mine.CredentialSets) != 2 || mine.CredentialSets[1][1] != "MY_URL" || mine.ReadOnly[0] != "/opt/myagent" || mine.PassEnv[0] != "MY_MODEL" || mine.Sandbox != "landlock" || mine.Workspace != "clone" || !mine.Ask ||
		!slices.Equal(mine.LendGit, []string{"https://git.example/me/a=fetch", "https://git.example/me/b"}) ||
		!slices.Equal(mine.LendSSHKey, []string{"SHA256:k=git.example,gh.example", "/home/me/.ssh/id.pub=git.example"}) || mine.LendSSHSign != "SHA256:s" {
		t.Errorf("myagent = %+v", mine)
	}
	if c := byName["codex"]; c.CredentialSets[0][0] != "ONLY_THIS" || !strings.HasSuffix(c.Source, "codex.conf") {
		t.Errorf("user codex did not replace the built-in: %+v", c)
	}
	if _, ok := byName["claude-code"]; !ok {
		t.Error("built-ins missing beside user profiles")
	}
	g, err := Resolve(Request{Command: []string{"myagent"}, ProfileDir: dir, LookupEnv: env(map[string]string{"MY_KEY": "k"})})
	if err != nil || g.Profile.Name != "myagent" {
		t.Errorf("profile from the command: %v %v", g.Profile.Name, err)
	}
	for name, content := range map[string]string{
		"bad1.conf":  "[Profile]\nCredentialSet=not-a-name\n",
		"bad2.conf":  "[Other]\nBinary=x\n",
		"bad3.conf":  "[Profile]\nUnknown=x\n",
		"bad4.conf":  "[Profile]\nReadOnlyPaths=relative\n",
		"Bad5.conf":  "[Profile]\n",
		"bad6.conf":  "[Profile]\nSandbox=none\n",
		"bad7.conf":  "[Profile]\nWorkspace=copy\n",
		"bad8.conf":  "[Profile]\nToolchain=relative/dir\n",
		"bad9.conf":  "[Profile]\nAsk=maybe\n",
		"bad10.conf": "[Profile]\nLendGit=git@git.example:me/repo.git\n",
		"bad11.conf": "[Profile]\nLendSSHKey=SHA256:abc\n",
		"bad12.conf": "[Profile]\nLendSSHKey=id.pub=github.com\n",
		"bad13.conf": "[Profile]\nLendSSHSign=SHA256:a\nLendSSHSign=SHA256:b\n",
		"bad14.conf": "[Profile]\nLendSSHSign=SHA256:a SHA256:b\n",
		"bad15.conf": "[Profile]\nLendSSHSign=\n",
		"bad16.conf": "[Profile]\nLendSSHSign=SHA256:a=github.com\n",
	} {
		d := t.TempDir()
		os.WriteFile(filepath.Join(d, name), []byte(content), 0o600)
		os.WriteFile(filepath.Join(d, "good.conf"), []byte("[Profile]\nBinary=good\n"), 0o600)
		list, broken := Profiles(d)
		var e *errcode.Error
		if len(broken) != 1 || !errors.As(broken[0], &e) || e.Code != "bad-profile" || !strings.Contains(e.Message, name) {
			t.Errorf("%s: %v, want bad-profile naming the file", name, broken)
		}
		// The others are still listed (issue 30).
		var names []string
		for _, p := range list {
			names = append(names, p.Name)
		}
		if !slices.Contains(names, "good") || !slices.Contains(names, "claude-code") {
			t.Errorf("%s: the others are not listed: %v", name, names)
		}
	}
}

// TestHold: the held file reads back as the environment file, by a link in
// the runtime directory to its /proc path, is sealed against writes, and
// once closed neither it nor its link is there: the unit's path names
// nothing, whatever process later has this PID.
func TestHold(t *testing.T) {
	rt := t.TempDir()
	h, err := Hold(rt, "s1", []credvar.Var{{Name: "A", Value: "x y"}, {Name: "B", Value: `q"$`}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := os.Readlink(h.Path); h.Path != sessionfile.Path(rt, "s1") || err != nil || !strings.HasPrefix(l, fmt.Sprintf("/proc/%d/fd/", os.Getpid())) {
		t.Errorf("path %s -> %s, %v", h.Path, l, err)
	}
	if b, err := os.ReadFile(h.Path); err != nil || string(b) != "A=\"x y\"\nB=\"q\\\"\\$\"\n" {
		t.Errorf("content %q, %v", b, err)
	}
	if f, err := os.OpenFile(h.Path, os.O_WRONLY, 0); err == nil {
		_, werr := f.Write([]byte("C=1\n"))
		f.Close()
		if werr == nil {
			t.Error("the sealed file took a write")
		}
	}
	proc, _ := os.Readlink(h.Path)
	h.Close()
	if l, err := os.Readlink(proc); err == nil && strings.HasPrefix(l, "/memfd:mosaic-credentials-") {
		t.Error("the file outlived its Close")
	}
	if _, err := os.Lstat(h.Path); !os.IsNotExist(err) {
		t.Errorf("the link outlived its Close: %v", err)
	}
	if _, err := os.Lstat(filepath.Dir(h.Path)); !os.IsNotExist(err) {
		t.Errorf("the link's directory outlived its Close: %v", err)
	}
}

// A user profile for a built-in's binary wins over the built-in, whatever
// the names' order (issue 16: it used to depend on the alphabet).
func TestUserProfileForBinaryWins(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "zz-my-claude.conf"), []byte("[Profile]\nBinary=claude\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "aa-other.conf"), []byte("[Profile]\nBinary=other\n"), 0o600)
	p, err := ProfileFor(dir, []string{"/usr/local/bin/claude"})
	if err != nil || p.Name != "zz-my-claude" {
		t.Errorf("ProfileFor(claude) = %s, %v; want the user's zz-my-claude", p.Name, err)
	}
	p, _ = ProfileFor(t.TempDir(), []string{"claude"})
	if p.Name != "claude-code" {
		t.Errorf("without a user profile: %s", p.Name)
	}
}
