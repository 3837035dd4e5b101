package sandbox

import (
	"reflect"
	"testing"
)

func TestInitEnv(t *testing.T) {
	argv := append([]string{"/usr/bin/bwrap", "--unshare-pid", "--chdir", "/w", "--", InitPath},
		InitArgv(InitOptions{Session: "s", Home: "/h", Pass: []string{"MODEL"}, Credentials: []string{"API_KEY"}}, []string{"sh", "--pass", "EVIL"})...)
	environ := []string{
		"PATH=/usr/bin", "LC_ALL=C", "TERM=xterm", "MODEL=m", "API_KEY=k", PromiseEnv + "=p", NotifyFDEnv + "=5",
		"SSH_AUTH_SOCK=/run/user/1/ssh", "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1/bus", "DISPLAY=:0", "SECRET_X=1",
		"EVIL=the command's own --pass is not the init's", "NOTIFY_SOCKET=/run/user/1/systemd/notify", "HOME=/home/u",
	}
	got, err := InitEnv(environ, argv)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=/usr/bin", "LC_ALL=C", "TERM=xterm", "MODEL=m", "API_KEY=k", PromiseEnv + "=p", NotifyFDEnv + "=5"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("InitEnv =\n%q\nwant\n%q", got, want)
	}
	if _, err := InitEnv(environ, []string{"/usr/bin/bwrap", "--", "/bin/sh"}); err == nil {
		t.Error("InitEnv accepted a bwrap command line without mosaic's init")
	}
}
