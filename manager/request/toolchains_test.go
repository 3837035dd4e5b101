package request

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The session's PATH is the user's: visible directories kept in order,
// toolchains bound where they are installed (only what runs: never
// ~/.cargo, which holds credentials.toml, nor a deny-list entry), every
// other directory dropped with its reason, then mosaic's own (issue 30).
func TestSessionPath(t *testing.T) {
	p, root := fixture(t)
	h := func(rel string) string { return filepath.Join(p.Home, rel) }
	app := h("src/app")
	opt := filepath.Join(root, "opt")
	for _, d := range []string{".cargo/bin", ".rustup/toolchains", ".nvm/versions/node/v22.1.0/bin", ".local/bin", ".local/lib/python3.11",
		"bin", "go/bin", ".ssh/bin", "src/app/node_modules/.bin", "own-only"} {
		os.MkdirAll(h(d), 0o755)
	}
	for _, d := range []string{"rust/bin", "jdk/bin", "bin"} {
		os.MkdirAll(filepath.Join(opt, d), 0o755)
	}
	os.WriteFile(h(".cargo/credentials.toml"), []byte("[registry]\ntoken = \"x\"\n"), 0o600)
	os.Symlink(filepath.Join(opt, "rust"), h(".rustup/toolchains/linked")) // rustup toolchain link
	own := filepath.Join(p.SessionDir("s"), "home")
	os.MkdirAll(filepath.Join(own, ".bun", "bin"), 0o755) // installed by the session in its kept home
	deny, err := DenyList(p)
	if err != nil {
		t.Fatal(err)
	}
	defer func(old []string) { systemToolchainRoots = old }(systemToolchainRoots)
	systemToolchainRoots = []string{opt}
	visible := func(real string) bool { return systemFile(real) || strings.HasPrefix(real+"/", app+"/") }

	user := strings.Join([]string{h(".cargo/bin"), "/usr/local/go/bin", h("bin"), "bin", "",
		h(".nvm/versions/node/v22.1.0/bin"), filepath.Join(root, "nope"), h(".local/bin"), h(".ssh/bin"), app + "/node_modules/.bin",
		filepath.Join(opt, "bin"), h(".bun/bin"), "/usr/bin", h(".cargo/bin"), h("go/bin")}, ":")
	if _, err := os.Stat("/usr/local/go/bin"); err != nil {
		user = strings.Replace(user, "/usr/local/go/bin:", "", 1)
	}
	up := sessionPath(user, []string{"~/.cargo", filepath.Join(opt, "jdk")}, nil, p.Home, own, visible, deny)

	wantPath := []string{h(".cargo/bin"), "/usr/local/go/bin", h(".nvm/versions/node/v22.1.0/bin"), h(".local/bin"),
		app + "/node_modules/.bin", filepath.Join(opt, "bin"), h(".bun/bin"), "/usr/bin", h("go/bin"), filepath.Join(opt, "jdk/bin"), "/usr/local/bin", "/bin"}
	if _, err := os.Stat("/usr/local/go/bin"); err != nil {
		wantPath = slices.Delete(wantPath, 1, 2)
	}
	if up.Path != strings.Join(wantPath, ":") {
		t.Errorf("PATH\n%s\nwant\n%s", strings.ReplaceAll(up.Path, ":", "\n"), strings.Join(wantPath, "\n"))
	}
	// The toolchains' directories; each is bound as its entries, but
	// prefixSecrets (TestPrefixSecretsHidden).
	binds := up.Roots
	wantBinds := []string{filepath.Join(opt, "jdk"), h(".cargo/bin"), h(".rustup"), filepath.Join(opt, "rust"), h(".nvm/versions/node/v22.1.0"),
		h(".local/bin"), h(".local/lib"), filepath.Join(opt, "bin"), h("go/bin")}
	if !slices.Equal(binds, wantBinds) {
		t.Errorf("binds\n%s\nwant\n%s", strings.Join(binds, "\n"), strings.Join(wantBinds, "\n"))
	}
	for _, c := range up.Binds {
		b := c.real
		if b == h(".cargo") || strings.HasPrefix(h(".cargo/credentials.toml"), b+"/") || strings.HasPrefix(b, h(".ssh")) {
			t.Errorf("%s is bound: it holds credentials", b)
		}
	}
	dropped := strings.Join(up.Dropped, "\n")
	for _, want := range []string{
		h("bin") + ": not a toolchain directory mosaic knows under your home; to keep it, bind it with --ro " + h("bin"),
		"bin: a relative directory",
		`"" (the current directory): a relative directory`,
		filepath.Join(root, "nope") + ": does not exist",
		h(".ssh/bin") + ": overlaps " + h(".ssh") + ", SSH keys",
		h(".cargo") + " (the profile's Toolchain=): " + h(".cargo") + " overlaps " + h(".cargo/credentials.toml"),
		"cargo's registry tokens",
	} {
		if !strings.Contains(dropped, want) {
			t.Errorf("dropped does not say %q:\n%s", want, dropped)
		}
	}
	if strings.Contains(dropped, "own-only") || strings.Contains(dropped, ".bun") {
		t.Errorf("dropped a directory the session has:\n%s", dropped)
	}
}

// --env PATH= and --pass-env PATH are not secrets: accepted, and the
// session's PATH is worked out from the one given.
func TestPathGiven(t *testing.T) {
	p, _ := fixture(t)
	app := filepath.Join(p.Home, "src", "app")
	t.Setenv("PATH", "/usr/sbin:/usr/bin")
	for _, tc := range []struct {
		req  Request
		want string
	}{
		{Request{Workspace: app, Command: []string{"true"}}, "PATH=/usr/sbin:/usr/bin:/usr/local/bin:/bin"},
		{Request{Workspace: app, Command: []string{"true"}, PassEnv: []string{"PATH"}}, "PATH=/usr/sbin:/usr/bin:/usr/local/bin:/bin"},
		{Request{Workspace: app, Command: []string{"true"}, SetEnv: []string{"PATH=/bin:" + filepath.Join(p.Home, "bin")}}, "PATH=/bin:/usr/local/bin:/usr/bin"},
	} {
		spec, _, err := Prepare(tc.req, p, "/usr/bin/bwrap")
		if err != nil {
			t.Fatalf("%+v: %v", tc.req, err)
		}
		if !slices.Contains(spec.Env, tc.want) {
			t.Errorf("%+v: env %v, want %s", tc.req, spec.Env, tc.want)
		}
	}
	for _, name := range []string{"HOME", "TMPDIR", "MOSAIC_SESSION"} {
		_, _, err := Prepare(Request{Workspace: app, Command: []string{"true"}, SetEnv: []string{name + "=x"}}, p, "/usr/bin/bwrap")
		if err == nil || !strings.Contains(err.Error(), "mosaic") || strings.Contains(err.Error(), "secret") {
			t.Errorf("--env %s=x: %v, want a refusal that says mosaic sets it", name, err)
		}
	}
}

// A toolchain's location variable reaches the session where it names a
// directory the session sees; one it does not see, or that the user set
// already, is left alone.
func TestToolchainVars(t *testing.T) {
	seen, unseen := t.TempDir(), t.TempDir()
	env := map[string]string{"RUSTUP_HOME": seen, "JAVA_HOME": unseen, "GOROOT": seen, "CARGO_HOME": seen, "PYENV_ROOT": "relative"}
	lookup := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	got := toolchainVars(lookup, []string{"GOROOT=/given"}, func(real string) bool { return real == seen })
	if strings.Join(got, " ") != "RUSTUP_HOME="+seen {
		t.Errorf("got %v", got)
	}
}

// A toolchain's install prefix is bound but the files its tools read as
// configuration that can carry a credential (prefixSecrets): npm's global
// etc/npmrc in an nvm node, pip.conf in a pyenv Python, Maven's
// conf/settings.xml, cargo's credentials.toml in a CARGO_HOME under /opt;
// present at the start or written later, in a prefix or in one of its
// nested prefixes, directly or through a link (issue 40).
func TestPrefixSecretsHidden(t *testing.T) {
	p, root := fixture(t)
	h := func(rel string) string { return filepath.Join(p.Home, rel) }
	opt := filepath.Join(root, "opt")
	node := h(".nvm/versions/node/v22.1.0")
	files := map[string]string{
		node + "/bin/node": "", node + "/lib/node_modules/npm/package.json": "", node + "/include/node/node.h": "",
		node + "/etc/npmrc": "//registry.npmjs.org/:_authToken=npm_SECRET\n", node + "/etc/other": "",
		h(".pyenv/bin/pyenv"): "", h(".pyenv/versions/3.12.1/bin/python3"): "", h(".pyenv/versions/3.12.1/pip.conf"): "[global]\nindex-url = https://u:SECRET@x/\n",
		h(".pyenv/versions/3.12.1/lib/python3.12/os.py"): "", h(".pyenv/pip.conf"): "SECRET",
		opt + "/maven/bin/mvn": "", opt + "/maven/conf/settings.xml": "<password>SECRET</password>", opt + "/maven/conf/logging/simplelogger.properties": "",
		opt + "/cargo/bin/cargo": "", opt + "/cargo/credentials.toml": "token = \"SECRET\"", opt + "/cargo/config.toml": "SECRET",
		opt + "/elsewhere/pip.conf": "SECRET", opt + "/elsewhere/bin/python3": "",
		opt + "/cargo/.docker/config.json": "SECRET", opt + "/cargo/config/defaults.toml": "", // config/ a directory: not cargo's config
	}
	for f, body := range files {
		os.MkdirAll(filepath.Dir(f), 0o755)
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink(opt+"/elsewhere", h(".pyenv/versions/linked")) // pyenv's link to a Python elsewhere
	os.Symlink("etc/npmrc", node+"/npmrc-link")
	deny, err := DenyList(p)
	if err != nil {
		t.Fatal(err)
	}
	defer func(old []string) { systemToolchainRoots = old }(systemToolchainRoots)
	systemToolchainRoots = []string{opt}
	user := strings.Join([]string{node + "/bin", h(".pyenv/bin"), opt + "/maven/bin", opt + "/cargo/bin"}, ":")
	up := sessionPath(user, nil, nil, p.Home, "", func(string) bool { return false }, deny)
	shown := func(path string) bool {
		for _, c := range up.Binds {
			if strings.HasPrefix(path+"/", c.real+"/") {
				return true
			}
		}
		return false
	}
	// Written after the binds were worked out: a tool that creates its
	// config while the session runs.
	later := []string{node + "/lib/../etc/yarnrc", opt + "/maven/conf/settings-security.xml", h(".pyenv/versions/3.12.1/etc/npmrc"), opt + "/cargo/credentials"}
	for f, body := range files {
		secret := strings.Contains(body, "SECRET")
		if strings.HasPrefix(f, opt+"/elsewhere/") {
			secret = true // reached only through the link left out
		}
		if shown(f) == secret {
			t.Errorf("%s shown %v, want %v", f, secret, !secret)
		}
	}
	for _, f := range append(later, node+"/npmrc-link") {
		if shown(filepath.Clean(f)) {
			t.Errorf("%s (written later, or a link to a secret) would be shown", f)
		}
	}
	if !strings.Contains(strings.Join(up.Dropped, "\n"), h(".pyenv/versions/linked")+": left out") {
		t.Errorf("the link out of pyenv's versions is not named as left out:\n%s", strings.Join(up.Dropped, "\n"))
	}
	if up.Path != strings.Join([]string{user, "/usr/local/bin:/usr/bin:/bin"}, ":") {
		t.Errorf("PATH %s", up.Path)
	}
}
