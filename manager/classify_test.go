package manager

import (
	"context"
	"fmt"
	"testing"

	"github.com/godbus/dbus/v5"

	"mosaic/units/errcode"
)

func TestBugClassifiesSystemdErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code string
	}{
		{fmt.Errorf("call: %w", context.DeadlineExceeded), "systemd-timeout"},
		{dbus.ErrClosed, "systemd-gone"},
		{dbus.Error{Name: errNoSuchUnit, Body: []any{"no such unit"}}, "no-such-session"},
		{dbus.Error{Name: "org.freedesktop.DBus.Error.AccessDenied"}, "systemd-error"},
	} {
		if got := errcode.Of(bug("X", tc.err)).Code; got != tc.code {
			t.Errorf("bug(%v) = %s, want %s", tc.err, got, tc.code)
		}
	}
}
