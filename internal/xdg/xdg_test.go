package xdg

import "testing"

// A relative or empty XDG_CONFIG_HOME is ~/.config; an absolute one is
// taken as it is.
func TestConfigHome(t *testing.T) {
	for v, want := range map[string]string{"": "/h/.config", "cfg": "/h/.config", "./c": "/h/.config", "/etc/u": "/etc/u"} {
		got := ConfigHome("/h", func(name string) string {
			if name != "XDG_CONFIG_HOME" {
				t.Errorf("read %s", name)
			}
			return v
		})
		if got != want {
			t.Errorf("XDG_CONFIG_HOME=%q: %s, want %s", v, got, want)
		}
	}
}
