package credentials

import (
	"fmt"
	"slices"
	"strings"
)

// BuildSettings are the variables of the launching environment every
// session gets by default (docs/environment.md lists them): how the
// user's build tools fetch, build and report, which are settings, not
// secrets. One whose value looks like it carries a credential
// (credentialIn) is not passed, and named (Grant.Dropped). Paths of the
// user's own (GOPATH, GOCACHE, CARGO_HOME, ...) are not among them: the
// session has a home and caches of its own.
var BuildSettings = []string{
	// Go
	"GOFLAGS", "GOPROXY", "GOPRIVATE", "GONOPROXY", "GONOSUMDB", "GOSUMDB", "GOINSECURE",
	"GOTOOLCHAIN", "GOEXPERIMENT", "GOAMD64", "GOARM64", "CGO_ENABLED",
	// C and make
	"CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "MAKEFLAGS",
	// Rust
	"RUSTFLAGS", "CARGO_BUILD_JOBS", "CARGO_INCREMENTAL", "CARGO_TERM_COLOR", "RUST_BACKTRACE",
	// Python
	"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "PYTHONDONTWRITEBYTECODE",
	// Node
	"NPM_CONFIG_REGISTRY", "npm_config_registry", "NODE_OPTIONS",
}

// BuildEnvOf are the BuildSettings set in the environment lookup reads,
// never nil: what a launch through the bus or --host carries for the
// session (Request.BuildEnv), values unchecked (the session's side drops
// and names one that looks like a credential).
func BuildEnvOf(lookup func(string) (string, bool)) map[string]string {
	env := map[string]string{}
	for _, name := range BuildSettings {
		if v, ok := lookup(name); ok {
			env[name] = v
		}
	}
	return env
}

// BuildEnvIn are the BuildSettings among environ's NAME=VALUE entries (a
// session's record), never nil.
func BuildEnvIn(environ []string) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		if n, v, ok := strings.Cut(kv, "="); ok && slices.Contains(BuildSettings, n) {
			env[n] = v
		}
	}
	return env
}

// buildSettings are the BuildSettings set in the launching environment
// (lookup) that pass, as NAME=VALUE, leaving out those given otherwise
// (given: a profile's, --env, --pass-env, which win) or as credentials
// (secret); those not passed for their value are added to g.Dropped,
// with a note saying why (never the value).
func (g *Grant) buildSettings(lookup func(string) (string, bool), given map[string]string, secret map[string]int) []string {
	var pass []string
	for _, name := range BuildSettings {
		_, isGiven := given[name]
		_, isSecret := secret[name]
		v, ok := lookup(name)
		if isGiven || isSecret || !ok {
			continue
		}
		why, way := credentialIn(v), fmt.Sprintf(" (pass it with --credential %s if the session needs it)", name)
		if why == "" && ValidateValue(name, v, "") != nil {
			// --credential refuses such a value as well: no advice.
			why, way = "it cannot be passed (not UTF-8, too long or a control character)", ""
		}
		if why != "" {
			g.Dropped = append(g.Dropped, name)
			g.Notes = append(g.Notes, fmt.Sprintf("%s of your environment was not passed: %s%s", name, why, way))
			continue
		}
		pass = append(pass, name+"="+v)
	}
	return pass
}

// credentialIn says why value looks like it carries a credential ("" when
// it does not): a URL with a user (https://user:pass@host, or a token as
// the user), or a word naming a secret given a value (token=, password:).
func credentialIn(value string) string {
	for _, f := range strings.FieldsFunc(value, func(r rune) bool { return strings.ContainsRune(" ,|;\t", r) }) {
		if _, rest, ok := strings.Cut(f, "://"); ok {
			if end := strings.IndexAny(rest, "/?#"); end >= 0 {
				rest = rest[:end]
			}
			if strings.Contains(rest, "@") { // rest is the URL's authority
				return "a URL in it holds a user name or password (user:pass@)"
			}
		}
		lower := strings.ToLower(f)
		for _, w := range []string{"token", "password", "passwd", "secret", "apikey", "api_key", "_auth"} {
			for i := strings.Index(lower, w); i >= 0; i = next(lower, w, i) {
				if end := i + len(w); end < len(lower) && (lower[end] == '=' || lower[end] == ':') {
					return "it gives a value to " + strings.TrimPrefix(w, "_")
				}
			}
		}
	}
	return ""
}

// next is the index of the next w in s after the one at i, or -1.
func next(s, w string, i int) int {
	j := strings.Index(s[i+1:], w)
	if j < 0 {
		return -1
	}
	return i + 1 + j
}
