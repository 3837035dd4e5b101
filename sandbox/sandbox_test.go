package sandbox

import (
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

type fakeInfo struct {
	name string
	mode fs.FileMode
}

func (f fakeInfo) Name() string       { return f.name }
func (f fakeInfo) Size() int64        { return 0 }
func (f fakeInfo) Mode() fs.FileMode  { return f.mode }
func (f fakeInfo) ModTime() time.Time { return time.Time{} }
func (f fakeInfo) IsDir() bool        { return f.mode.IsDir() }
func (f fakeInfo) Sys() any           { return nil }

// host is a fake host: merged /bin and /lib, a real /lib64 directory, no /sbin.
func host() (func(string) (os.FileInfo, error), func(string) (string, error)) {
	entries := map[string]fs.FileMode{"/bin": fs.ModeSymlink, "/lib": fs.ModeSymlink, "/lib64": fs.ModeDir}
	lstat := func(p string) (os.FileInfo, error) {
		if m, ok := entries[p]; ok {
			return fakeInfo{p, m}, nil
		}
		return nil, os.ErrNotExist
	}
	readlink := func(p string) (string, error) { return "usr" + p, nil }
	return lstat, readlink
}

var opts = Options{
	Workspace:   "/home/u/proj",
	Home:        "/home/u",
	SessionHome: "/home/u/.local/state/mosaic/sessions/s/home",
	TmpSize:     64 << 20,
	HomeSize:    128 << 20,
	MosaicBin:   "/home/u/go/bin/mosaic",
	StageBin:    "/home/u/go/bin/mosaic-stage",
	ExtraRO:     []string{"/opt/ro"},
	ExtraRW:     []string{"/srv/rw"},
}

// TestEveryBindHasAReason walks the list: a mount without a reason is a mount
// nobody can defend.
func TestEveryBindHasAReason(t *testing.T) {
	lstat, readlink := host()
	for _, b := range Binds(opts, lstat, readlink) {
		if strings.TrimSpace(b.Reason) == "" {
			t.Errorf("bind %+v has no reason", b)
		}
		if b.Dst == "" || !strings.HasPrefix(b.Dst, "/") {
			t.Errorf("bind %+v has no absolute destination", b)
		}
	}
}

func TestBinds(t *testing.T) {
	lstat, readlink := host()
	var got []string
	for _, b := range Binds(opts, lstat, readlink) {
		got = append(got, b.Kind+" "+b.Src+" "+b.Dst)
	}
	want := []string{
		"ro-bind /usr /usr",
		"ro-bind /etc /etc",
		"symlink usr/bin /bin",
		"symlink usr/lib /lib",
		"ro-bind /lib64 /lib64",
		"dev  /dev",
		"proc  /proc",
		"ro-bind /home/u/go/bin/mosaic-stage " + InitPath,
		"tmpfs /home/u/.local/state/mosaic/sessions/s/home /home/u",
		"tmpfs  /tmp",
		"bind /home/u/proj /home/u/proj",
		"ro-bind /opt/ro /opt/ro",
		"bind /srv/rw /srv/rw",
	}
	if !slices.Equal(got, want) {
		t.Errorf("binds:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Nothing of the host but the listed paths: no /sys, /run, real home or runtime dir.
	for _, g := range got {
		for _, bad := range []string{"/sys", "/run/user", " /run "} {
			if strings.Contains(g, bad) {
				t.Errorf("bind %q exposes %s", g, bad)
			}
		}
	}
}

// TestBindsSSHConfig: the user's copy of the ssh snippets is bound
// read-only over the system's, after /etc (a bind before it would be
// covered), and only when there is one.
func TestBindsSSHConfig(t *testing.T) {
	lstat, readlink := host()
	o := opts
	o.SSHConfig = "/run/user/1000/mosaic/ssh-config/abc"
	etc, ssh := -1, -1
	for i, b := range Binds(o, lstat, readlink) {
		switch {
		case b.Dst == "/etc":
			etc = i
		case b.Dst == SSHConfigDirHost:
			if b.Kind != KindRO || b.Src != o.SSHConfig {
				t.Errorf("the snippets' bind: %+v", b)
			}
			ssh = i
		}
	}
	if etc < 0 || ssh < etc {
		t.Errorf("the snippets' bind at %d, /etc's at %d: want it after", ssh, etc)
	}
	for _, b := range Binds(opts, lstat, readlink) {
		if b.Dst == SSHConfigDirHost {
			t.Errorf("a snippets' bind with no copy: %+v", b)
		}
	}
}

func TestArgv(t *testing.T) {
	lstat, readlink := host()
	argv := Argv(Binds(opts, lstat, readlink), opts.Workspace, []string{InitPath, "init", "--", "cmd"})
	s := strings.Join(argv, " ")
	if !strings.Contains(s, " --size 67108864 --tmpfs /tmp ") {
		t.Errorf("the session's /tmp is not a tmpfs of its bound: %s", s)
	}
	// The home is a tmpfs of its bound; its home on disk is never mounted.
	if !strings.Contains(s, " --size 134217728 --tmpfs /home/u ") || strings.Contains(s, opts.SessionHome) {
		t.Errorf("the session's home is not a tmpfs of its bound, or its home on disk is bound: %s", s)
	}
	for _, flag := range []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session", "--cap-drop ALL", "--as-pid-1"} {
		if !strings.Contains(s, flag) {
			t.Errorf("argv lacks %s: %s", flag, s)
		}
	}
	for _, flag := range []string{"--share-net", "--bind / ", "--dev-bind"} {
		if strings.Contains(s, flag) {
			t.Errorf("argv has %s: %s", flag, s)
		}
	}
	if !strings.HasSuffix(s, "--chdir /home/u/proj -- "+InitPath+" init -- cmd") {
		t.Errorf("argv ends wrong: %s", s)
	}
	if !strings.Contains(s, "--dev /dev --proc /proc") {
		t.Errorf("argv lacks the private /dev and /proc: %s", s)
	}
}

func TestCommandEnv(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin", "TERM=xterm", "LANG=C.UTF-8", "LC_ALL=C", "USER=u",
		"SSH_AUTH_SOCK=/run/user/1000/ssh", "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus",
		"DISPLAY=:0", "GITHUB_TOKEN=ghp_x", "XDG_RUNTIME_DIR=/run/user/1000", "HOME=/home/real",
		"NOTIFY_SOCKET=/run/user/1000/systemd/notify", "ANTHROPIC_API_KEY=sk", "MOSAIC_NOTIFY_FD=3",
	}
	got := CommandEnv(environ, "s1", "/home/u", []string{"ANTHROPIC_API_KEY"})
	want := []string{"PATH=/usr/bin", "TERM=xterm", "LANG=C.UTF-8", "LC_ALL=C", "USER=u", "ANTHROPIC_API_KEY=sk",
		"HOME=/home/u", "TMPDIR=/tmp", "MOSAIC_SESSION=s1"}
	if !slices.Equal(got, want) {
		t.Errorf("CommandEnv =\n%q\nwant\n%q", got, want)
	}
	if got := CommandEnv(nil, "s", "/h", nil); got[0] != "PATH="+DefaultPath {
		t.Errorf("without PATH: %q", got)
	}
}

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		path, dir string
		want      bool
	}{
		{"/home/u", "/home/u", true}, {"/home/u/x", "/home/u", true}, {"/home/uu", "/home/u", false},
		{"/home", "/home/u", false}, {"/anything", "/", true},
	} {
		if got := Within(tc.path, tc.dir); got != tc.want {
			t.Errorf("Within(%q, %q) = %v", tc.path, tc.dir, got)
		}
	}
}

func TestInitArgv(t *testing.T) {
	got := strings.Join(InitArgv(InitOptions{Session: "s", Home: "/h", Pass: []string{"A", "B"}, Credentials: []string{"K"}}, []string{"cmd", "--pass", "x"}), " ")
	if got != "init --session s --home /h --pass A --pass B --credential K -- cmd --pass x" {
		t.Errorf("InitArgv = %q", got)
	}
}
