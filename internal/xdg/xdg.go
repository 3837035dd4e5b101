// Package xdg is the one reader of the XDG base directory variable that
// places the user's mosaic configuration (profiles, the bus's policy, the
// hosts file, the deny list): request.UserPaths, the credential store, the
// bus and --host's hosts file all ask it, so that they cannot disagree on
// where ~/.config is.
package xdg

import "path/filepath"

// ConfigHome is the user's configuration directory: $XDG_CONFIG_HOME (as
// getenv reads it) when it is absolute, else home/.config, as the base
// directory specification says of a relative one.
func ConfigHome(home string, getenv func(string) string) string {
	cfg := getenv("XDG_CONFIG_HOME")
	if cfg == "" || !filepath.IsAbs(cfg) {
		cfg = filepath.Join(home, ".config")
	}
	return cfg
}
