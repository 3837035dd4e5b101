package main

import (
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Issue 30: an agent works as its user does, with the user's toolchain
// and git identity, in a session that names itself.

// TestSessionHostname: inside, the host name and MOSAIC_SESSION are the
// session's, so a prompt says where one types.
func TestSessionHostname(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t)
	r := mosaic(t, "run", "--name", name, "-w", workspace(t), "--", "sh", "-c", `cat /proc/sys/kernel/hostname; echo "$MOSAIC_SESSION"`)
	if r.code != 0 || r.stdout != name+"\n"+name+"\n" {
		t.Errorf("exit %d, stdout %q, stderr %q; want the session's name twice", r.code, r.stdout, r.stderr)
	}
	if h, _ := os.Hostname(); h == name {
		t.Errorf("the host's name became %s", h)
	}
}

// copyFile copies src to dst (made executable with mode), skipping the
// copy when dst already has src's size (a copy a previous run made).
func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	si, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	if di, err := os.Stat(dst); err == nil && di.Size() == si.Size() {
		return
	}
	os.MkdirAll(filepath.Dir(dst), 0o755)
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst+".tmp", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	out.Close()
	if err := os.Rename(dst+".tmp", dst); err != nil {
		t.Fatal(err)
	}
}

// TestUserToolchains: a Go, Rust, Node and Python project builds inside a
// session with the user's own toolchains, found on the user's PATH where
// they are installed: Go under /usr/local, Rust's rustup under ~/.cargo
// (its toolchain linked from /opt) and Rust under /opt, node under
// ~/.nvm, a pip --user module and script under ~/.local. Nothing of
// ~/.cargo but its bin/ is there (credentials.toml stays out), the
// caches are written in the session's own home, and a PATH directory the
// session cannot see is dropped and named in status.
func TestUserToolchains(t *testing.T) {
	needRig(t)
	home := homeDir()
	h := func(rel string) string { return filepath.Join(home, rel) }
	for _, need := range []string{"/opt/rust/bin/cargo", "/opt/rustup/rustup", "/usr/local/go/bin/go", "/usr/bin/python3"} {
		if _, err := os.Stat(need); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing: contrib/rig.sh gives the rig root's Rust toolchain in /opt (rig_toolchains); the machine needs Go, node, python3 and cc", need)
			}
			t.Skipf("%s is missing (contrib/rig.sh binds root's Rust toolchain at /opt/rust)", need)
		}
	}
	// The 257 rig's Debian root has no node (nor npm): there a copy of sh
	// stands for nvm's node, and the session shows it finds that one.
	_, err := os.Stat("/usr/bin/npm")
	hasNode := err == nil
	// rustup under ~/.cargo, its toolchain linked (rustup toolchain link).
	copyFile(t, "/opt/rustup/rustup", h(".cargo/bin/rustup"), 0o755)
	for _, proxy := range []string{"cargo", "rustc"} {
		os.Remove(h(".cargo/bin/" + proxy))
		if err := os.Link(h(".cargo/bin/rustup"), h(".cargo/bin/"+proxy)); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, h(".cargo/credentials.toml"), "[registry]\ntoken = \"cio-secret-token\"\n")
	os.MkdirAll(h(".rustup/toolchains"), 0o755)
	writeFile(t, h(".rustup/settings.toml"), "version = \"12\"\ndefault_toolchain = \"rig\"\nprofile = \"minimal\"\n")
	os.Remove(h(".rustup/toolchains/rig"))
	if err := os.Symlink("/opt/rust", h(".rustup/toolchains/rig")); err != nil {
		t.Fatal(err)
	}
	// node as nvm installs it; a pip --user module and its script.
	nodeDir := h(".nvm/versions/node/v99.0.0-rig/bin")
	if hasNode {
		copyFile(t, "/usr/bin/node", filepath.Join(nodeDir, "node"), 0o755)
	} else {
		os.Remove(filepath.Join(nodeDir, "node"))
		copyFile(t, "/bin/sh", filepath.Join(nodeDir, "node"), 0o755)
	}
	site, err := exec.Command("/usr/bin/python3", "-c", "import site; print(site.getusersitepackages())").Output()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(strings.TrimSpace(string(site)), "rigmod.py"), "GREETING = 'python from ~/.local'\n")
	writeFile(t, h(".local/bin/rigtool"), "#!/usr/bin/python3\nimport rigmod\nprint(rigmod.GREETING)\n")
	os.Chmod(h(".local/bin/rigtool"), 0o755)
	os.MkdirAll(h("not-a-toolchain/bin"), 0o755)
	t.Cleanup(func() {
		for _, d := range []string{".rustup", ".nvm", "not-a-toolchain"} {
			os.RemoveAll(h(d))
		}
		os.Remove(h(".cargo/credentials.toml"))
	})

	ws := workspace(t)
	writeFile(t, filepath.Join(ws, "goproj/go.mod"), "module example.com/goproj\n\ngo 1.21\n")
	// A package of no imports: a build with the session's empty cache
	// compiles it alone, not the standard library (seconds, not a minute).
	writeFile(t, filepath.Join(ws, "goproj/answer.go"), "package goproj\n\nfunc Answer() int { return 42 }\n")
	// A library crate: rustc alone builds it (the 257 rig has no C linker).
	writeFile(t, filepath.Join(ws, "rustproj/Cargo.toml"), "[package]\nname = \"rustproj\"\nversion = \"0.1.0\"\nedition = \"2021\"\n")
	writeFile(t, filepath.Join(ws, "rustproj/src/lib.rs"), "pub fn answer() -> u32 { 42 }\n")
	writeFile(t, filepath.Join(ws, "nodeproj/package.json"), `{"name":"nodeproj","version":"1.0.0","scripts":{"build":"node build.js"}}`)
	writeFile(t, filepath.Join(ws, "nodeproj/build.js"), "require('fs').writeFileSync('out.txt', 'node ' + process.execPath + '\\n')\n")
	writeFile(t, filepath.Join(ws, "pyproj/app.py"), "import rigmod\nprint('python built')\n")

	nodeStep := "cd nodeproj && npm run -s build && cat out.txt && cd .."
	if !hasNode {
		nodeStep = `echo "node $(command -v node)"`
	}
	script := `set -e
(cd goproj && go build ./... && echo "go built")
(cd rustproj && cargo build -q --offline && test -f target/debug/librustproj.rlib && echo "rust built")
(` + nodeStep + `)
(cd pyproj && python3 -m py_compile app.py && rigtool)
test ! -e ~/.cargo/credentials.toml && echo "no credentials.toml"
ls ~/.cargo
`
	name := sessionName(t)
	path := strings.Join([]string{h("not-a-toolchain/bin"), h(".cargo/bin"), nodeDir, h(".local/bin"), "/usr/local/go/bin", "/usr/local/bin", "/usr/bin", "/bin"}, ":")
	r := mosaicWith(t, []string{"PATH=" + path}, "", "run", "--name", name, "-w", ws, "--env", "GOTOOLCHAIN=local", "--env", "GOFLAGS=-buildvcs=false", "--", "sh", "-c", script)
	// ~/.cargo holds the toolchain's bin and the workspace's registry cache
	// (sandbox.ToolCaches), nothing else of the user's ~/.cargo.
	want := "go built\nrust built\nnode " + filepath.Join(nodeDir, "node") + "\npython from ~/.local\nno credentials.toml\nbin\nregistry\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("exit %d\nstdout %q\nwant   %q\nstderr %s", r.code, r.stdout, want, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "cio-secret-token") {
		t.Error("the cargo token reached the session")
	}
	// The build caches are the workspace's (sandbox.ToolCaches), not the
	// session's home's.
	real, _ := filepath.EvalSymlinks(ws)
	caches := toolCachesOf(real)
	if len(caches) != 1 {
		t.Fatalf("the workspace has %d tool cache directories after one session, want 1: %q", len(caches), caches)
	}
	if entries, err := os.ReadDir(filepath.Join(caches[0], "go-build")); err != nil || len(entries) == 0 {
		t.Errorf("the workspace's Go build cache is empty after a build: %v", err)
	}
	st := decode[struct {
		PathDropped []string `json:"path_dropped"`
		Binds       []struct{ Src, Reason string }
	}](t, mustMosaic(t, "status", "--json", name).stdout)
	if len(st.PathDropped) != 1 || !strings.HasPrefix(st.PathDropped[0], h("not-a-toolchain/bin")+": ") {
		t.Errorf("status names as dropped %q, want only %s", st.PathDropped, h("not-a-toolchain/bin"))
	}
	bound := map[string]bool{}
	for _, b := range st.Binds {
		if strings.HasPrefix(b.Reason, "a toolchain on your PATH") {
			bound[b.Src] = true
		}
	}
	// Each toolchain's directory is bound as its entries, but the files
	// its tools read as configuration that can carry a credential
	// (TestPrefixSecretsHidden).
	for _, b := range []string{h(".cargo/bin"), h(".rustup"), "/opt/rust", filepath.Dir(nodeDir), h(".local/bin"), h(".local/lib")} {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(bound)), func(src string) bool { return src == b || strings.HasPrefix(src, b+"/") }) {
			t.Errorf("%s is not bound as a toolchain: %v", b, bound)
		}
	}
	if bound[h(".cargo")] {
		t.Error("~/.cargo is bound whole")
	}

	// Rust under /opt alone, from a PATH given with --env.
	writeFile(t, filepath.Join(ws, "rustproj/src/lib.rs"), "pub fn answer() -> u32 { 43 }\n")
	r = mosaic(t, "run", "-w", ws, "--env", "PATH=/opt/rust/bin:/usr/bin:/bin", "--", "sh", "-c", "cd rustproj && rm -rf target && cargo build -q --offline && test -f target/debug/librustproj.rlib && command -v cargo")
	if r.code != 0 || r.stdout != "/opt/rust/bin/cargo\n" {
		t.Errorf("Rust from /opt: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
}

// TestGitInSession: git inside knows who the user is (their user.name and
// user.email, from their global config, includes followed) and nothing
// else of their config reaches it (credential helper, include, url
// rewrite, sshCommand, alias); --no-git-identity gives none. git init and
// git commit work in a plain workspace and in a repository's
// subdirectory, and nothing empty is left on the host.
func TestGitInSession(t *testing.T) {
	needRig(t)
	t.Parallel()
	cfg := filepath.Join(workspace(t), "config")
	writeFile(t, filepath.Join(cfg, "git", "config"), `[user]
	name = Rig User
[include]
	path = identity
[credential]
	helper = store --file /tmp/creds
[url "git@example.com:"]
	insteadOf = https://example.com/
[core]
	sshCommand = ssh -i /nonexistent/key
[alias]
	st = !echo alias ran
[init]
	defaultBranch = trunk
`)
	writeFile(t, filepath.Join(cfg, "git", "identity"), "[user]\n\temail = rig@example.com\n")
	env := []string{"XDG_CONFIG_HOME=" + cfg}
	script := `set -e
git config --global --list
git init -q . && echo x >f && git add f && git commit -q -m one && git log --format='%an <%ae> %s' && git branch --show-current
`
	for _, where := range []string{"plain", "subdir"} {
		ws := workspace(t)
		if where == "subdir" {
			if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
				t.Fatalf("git init: %v %s", err, out)
			}
			ws = filepath.Join(ws, "sub")
			os.MkdirAll(ws, 0o755)
		}
		r := mosaicWith(t, env, "", "run", "--direct", "-w", ws, "--", "sh", "-c", script)
		want := "init.defaultbranch=trunk\nuser.email=rig@example.com\nuser.name=Rig User\nRig User <rig@example.com> one\ntrunk\n"
		if r.code != 0 || r.stdout != want {
			t.Errorf("%s: exit %d\nstdout %q\nwant   %q\nstderr %s", where, r.code, r.stdout, want, r.stderr)
		}
		if entries, _ := os.ReadDir(filepath.Join(ws, ".git")); len(entries) == 0 {
			if _, err := os.Lstat(filepath.Join(ws, ".git")); err == nil {
				t.Errorf("%s: an empty .git is left in %s", where, ws)
			}
		}
	}
	r := mosaicWith(t, env, "", "run", "-w", workspace(t), "--no-git-identity", "--", "sh", "-c", "git config --global --list; test -e ~/.gitconfig && echo has gitconfig; true")
	if r.code != 0 || r.stdout != "" {
		t.Errorf("--no-git-identity: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
}

// TestLoginFromHome: mosaic login runs from the home (which no session may
// have as its workspace), binding no project: the sign-in gets an empty
// directory of its own, removed afterwards; login --help is help.
func TestLoginFromHome(t *testing.T) {
	needRig(t)
	t.Parallel()
	bin := workspace(t)
	os.WriteFile(filepath.Join(bin, "codex"), []byte("#!/bin/sh\necho \"$PWD\"; ls -A\n"), 0o700)
	name := sessionName(t)
	cmd := exec.Command(mosaicBin, "login", "codex", "--name", name, "--pty=false")
	cmd.Dir = homeDir()
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "OPENAI_API_KEY=", "CODEX_API_KEY=")
	r := runResult(t, cmd)
	dir, listed, _ := strings.Cut(r.stdout, "\n")
	// Nothing but direct mode's read-only placeholders (.git, .claude:
	// sandbox/directfloor), which the directory's removal takes along.
	if left := strings.Fields(listed); len(strings.Join(slices.DeleteFunc(left, func(e string) bool { return e == ".git" || e == ".claude" }), "")) != 0 {
		t.Errorf("the sign-in's directory is not empty: %q", listed)
	}
	if r.code != 0 || !strings.Contains(filepath.Base(dir), "mosaic-login-") {
		t.Fatalf("mosaic login from ~: exit %d, stdout %q, stderr %q; want it run in an empty directory of its own", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("the sign-in's directory %s is left: %v", dir, err)
	}
	st := decode[struct {
		Workspace string
		Binds     []struct{ Src, Kind string }
	}](t, mustMosaic(t, "status", "--json", name).stdout)
	for _, b := range st.Binds {
		if b.Kind == "bind" && b.Src != dir && (b.Src == homeDir() || strings.HasPrefix(b.Src, homeDir()+"/") && !strings.Contains(b.Src, "/.local/state/mosaic/")) {
			t.Errorf("the sign-in bound %s read-write", b.Src)
		}
	}
	if r := mosaic(t, "login", "--help"); r.code != 0 || !strings.Contains(r.stdout, "mosaic login") {
		t.Errorf("login --help: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestEndedStatusLimits: an ended session's status shows the limits it ran
// with, from its record, once systemd has forgotten its unit.
func TestEndedStatusLimits(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t)
	mustMosaic(t, "run", "--name", name, "-w", workspace(t), "--memory-max", "300M", "--tasks-max", "77", "--cpu-quota", "150%", "--", "true")
	eventually(t, 5*time.Second, "the unit collected", func() bool { return unitProperty(t, "mosaic-"+name+".service", "LoadState") == "not-found" })
	st := decode[struct {
		MemoryMax *uint64 `json:"memory_max"`
		TasksMax  *uint64 `json:"tasks_max"`
		CPUQuota  *uint64 `json:"cpu_quota_percent"`
	}](t, mustMosaic(t, "status", "--json", name).stdout)
	if st.MemoryMax == nil || *st.MemoryMax != 300<<20 || st.TasksMax == nil || *st.TasksMax != 77 || st.CPUQuota == nil || *st.CPUQuota != 150 {
		t.Errorf("ended session's limits: %+v", st)
	}
	if text := mustMosaic(t, "status", name).stdout; strings.Contains(text, "memory none") {
		t.Errorf("status says no memory limit:\n%s", text)
	}
}

// TestHomeOfNoSession: mosaic home of a name with no state (a typo) makes
// nothing; with --create it makes the home, which list --all shows as not
// run yet (not damaged) and rm removes.
func TestHomeOfNoSession(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t)
	dir := filepath.Join(stateRoot(), "sessions", name)
	r := mosaic(t, "home", "--json", name)
	if code, _ := jsonError(t, r); r.code != 3 || code != "no-such-session" {
		t.Errorf("home of no session: exit %d, %s", r.code, r.stdout)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("mosaic home of a typo made %s", dir)
	}
	mustMosaic(t, "home", "--create", name)
	list := mustMosaic(t, "list", "--all").stdout
	line := ""
	for _, l := range strings.Split(list, "\n") {
		if strings.HasPrefix(l, name+" ") {
			line = l
		}
	}
	if !strings.Contains(line, "not-run-yet") || strings.Contains(line, "damaged") {
		t.Errorf("list --all shows %s as %q:\n%s", name, line, list)
	}
	if st := mustMosaic(t, "status", name).stdout; !strings.Contains(st, "not-run-yet") {
		t.Errorf("status:\n%s", st)
	}
	mustMosaic(t, "rm", name)
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("rm left %s", dir)
	}
}

// TestGitConfigPlantedSymlink: a session leaves ~/.gitconfig in its kept
// home as a symlink into the user's real home; a plain write of the next
// start's gitconfig through it would change the user's file (shown on the
// host first); mosaic replaces the link and leaves the user's file alone.
func TestGitConfigPlantedSymlink(t *testing.T) {
	needRig(t)
	t.Parallel()
	decoy := filepath.Join(homeDir(), ".mosaic-test-decoy-"+randomHex())
	writeFile(t, decoy, "the user's own\n")
	t.Cleanup(func() { os.Remove(decoy) })
	cfg := filepath.Join(workspace(t), "config")
	writeFile(t, filepath.Join(cfg, "git", "config"), "[user]\n\tname = Rig User\n\temail = rig@example.com\n")
	env := []string{"XDG_CONFIG_HOME=" + cfg}
	name := sessionName(t)
	plant := mosaicWith(t, env, "", "run", "--name", name, "-w", workspace(t), "--", "sh", "-c", "rm -f ~/.gitconfig && ln -s "+decoy+" ~/.gitconfig")
	if plant.code != 0 {
		t.Fatalf("planting: exit %d %s", plant.code, plant.stderr)
	}
	planted := filepath.Join(stateRoot(), "sessions", name, "home", ".gitconfig")
	// The attack works against a writer that follows the link.
	os.WriteFile(planted, []byte("[user]\n\tname = x\n"), 0o600)
	if b, _ := os.ReadFile(decoy); string(b) == "the user's own\n" {
		t.Fatal("a write through the planted link did not reach the user's file: the test shows nothing")
	}
	writeFile(t, decoy, "the user's own\n")
	r := mosaicWith(t, env, "", "run", "--name", name, "-w", workspace(t), "--", "git", "config", "--global", "user.name")
	if r.code != 0 || r.stdout != "Rig User\n" {
		// The planting run's stderr says why its end left no summary of its
		// copy when that refuses this run (seen twice in CI, not reproduced).
		t.Errorf("second run: exit %d, stdout %q, stderr %s (the planting run's stderr: %q)", r.code, r.stdout, r.stderr, plant.stderr)
	}
	if b, _ := os.ReadFile(decoy); string(b) != "the user's own\n" {
		t.Errorf("the user's file was written through the session's link: %q", b)
	}
	if fi, err := os.Lstat(planted); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the session's ~/.gitconfig: %v %v, want a regular file", fi, err)
	}
	// --no-git-identity: what an earlier start wrote in the kept home goes.
	r = mosaicWith(t, env, "", "run", "--name", name, "-w", workspace(t), "--no-git-identity", "--", "sh", "-c", "git config --global user.name; test -e ~/.gitconfig && echo left; true")
	if r.code != 0 || r.stdout != "" {
		t.Errorf("--no-git-identity in a kept home: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
}

// TestBuildSettingsPassed (issue 40): the user's exported build settings
// (GOFLAGS) reach a session without a flag; one whose value looks like a
// credential (GOPROXY with user:pass@) does not, is named at the start
// (never its value) and in status as environment_dropped. Shown to fail
// before the change: GOFLAGS did not arrive.
func TestBuildSettingsPassed(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t)
	env := []string{"GOFLAGS=-buildvcs=false -tags=rig", "GOPROXY=https://ann:hunter2@proxy.mosaic.test", "CFLAGS=-O1"}
	r := mosaicWith(t, env, "", "run", "--name", name, "-w", workspace(t), "--", "sh", "-c", `echo "$GOFLAGS|${GOPROXY-unset}|$CFLAGS"`)
	defer mosaic(t, "rm", "--force", name)
	if r.code != 0 || r.stdout != "-buildvcs=false -tags=rig|unset|-O1\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "GOPROXY of your environment was not passed") || strings.Contains(r.stderr, "hunter2") {
		t.Errorf("the start's note: %s", r.stderr)
	}
	st := decode[struct {
		Dropped     []string `json:"environment_dropped"`
		Environment []string
	}](t, mustMosaic(t, "status", "--json", name).stdout)
	if !slices.Equal(st.Dropped, []string{"GOPROXY"}) || !slices.Contains(st.Environment, "GOFLAGS=-buildvcs=false -tags=rig") {
		t.Errorf("status: dropped %q, environment %q", st.Dropped, st.Environment)
	}
	if text := mustMosaic(t, "status", name).stdout; !strings.Contains(text, "not passed from yours") || strings.Contains(text, "hunter2") {
		t.Errorf("status:\n%s", text)
	}
}

// TestBuildSettingsOverHost (issue 40): through --host the session gets
// the build settings of the shell the command was typed in, as a start
// here would (GOFLAGS), over the remote's own environment, which gives
// those this shell does not set (CFLAGS, set by the remote's sshd); one
// that looks like a credential (GOPROXY with user:pass@) is dropped and
// named by the remote, never shown. Shown to fail before the change:
// GOFLAGS did not arrive.
func TestBuildSettingsOverHost(t *testing.T) {
	needRig(t)
	r := startSSHD(t, true, "CFLAGS=-O3", "GOFLAGS=-remote-flag")
	name := sessionName(t)
	t.Setenv("CFLAGS", "")
	os.Unsetenv("CFLAGS") // unset here: the remote's gives it
	env := []string{"GOFLAGS=-buildvcs=false -tags=host", "GOPROXY=https://ann:hunter2@proxy.mosaic.test", "CC=cc-of-the-shell"}
	res := r.mosaic(t, env, "", "run", "--name", name, "-w", workspace(t), "--", "sh", "-c", `echo "$GOFLAGS|${GOPROXY-unset}|$CFLAGS|$CC"`)
	defer mosaic(t, "rm", "--force", name)
	if res.code != 0 || res.stdout != "-buildvcs=false -tags=host|unset|-O3|cc-of-the-shell\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stderr, "GOPROXY of your environment was not passed") || strings.Contains(res.stderr, "hunter2") {
		t.Errorf("the start's note: %s", res.stderr)
	}
	st := decode[struct {
		Dropped []string `json:"environment_dropped"`
	}](t, r.mosaic(t, nil, "", "status", "--json", name).stdout)
	if !slices.Equal(st.Dropped, []string{"GOPROXY"}) {
		t.Errorf("status over --host: dropped %q", st.Dropped)
	}
}
