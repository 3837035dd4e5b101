package request

import (
	"fmt"
	"os"
	"strings"

	"mosaic/credentials"
	"mosaic/internal/errcode"
	"mosaic/sandbox"
	"mosaic/sandbox/egress"
	"mosaic/units"
)

// planInjection decides how each credential travels. With network allow, a
// credential whose profile has a rule for it stays out of the session: the
// session gets a placeholder (made at launch), the egress proxy the value
// through its own environment file, and the session trusts the proxy's CA
// for the rule's hosts, which join the allowlist. Without a proxy (network
// host or none) such a credential travels in the environment as before,
// and a note says so. A scope keeps its credentials in the environment:
// its secrets reach its exec shim directly, not through systemd.
func planInjection(spec *units.Spec, grant credentials.Grant, p Paths) error {
	lookup := func(name string) (string, bool) {
		for _, v := range grant.Secrets {
			if v.Name == name {
				return v.Value, true
			}
		}
		for _, kv := range grant.PassEnv {
			if n, v, ok := strings.Cut(kv, "="); ok && n == name {
				return v, true
			}
		}
		// A base URL the profile does not pass on (claude-code passes
		// ANTHROPIC_BASE_URL only with ANTHROPIC_AUTH_TOKEN) still names
		// where the key may go.
		return os.LookupEnv(name)
	}
	var ruled []string
	for _, v := range grant.Secrets {
		r, ok := grant.Profile.RuleFor(v.Name, lookup)
		if !ok {
			continue
		}
		if spec.Network != sandbox.NetworkAllow || spec.Scope {
			ruled = append(ruled, v.Name)
			continue
		}
		rule := egress.Rule{Var: v.Name, Headers: append([]string(nil), r.Headers...)}
		for _, h := range r.Hosts {
			// A base URL's path scopes the key to it (egress.SplitScope).
			hp, prefix, err := egress.SplitScope(h)
			if err != nil {
				return errcode.BadProfile.New("profile %s: the injection host of %s (its hosts, or its base URL variable): %w", grant.Profile.Name, v.Name, err)
			}
			rule.Hosts = append(rule.Hosts, hp+prefix)
		}
		// A rule's own check (header names) is the proxy's: fail here, not
		// in the unit.
		rule, err := egress.ParseRule(rule.String())
		if err != nil {
			return errcode.BadProfile.New("profile %s: %w", grant.Profile.Name, err)
		}
		spec.Inject = append(spec.Inject, rule)
		for _, entry := range rule.Hosts {
			hp, _, _ := egress.SplitScope(entry)
			if !contains(spec.Allow, hp) {
				spec.Allow = append(spec.Allow, hp)
			}
		}
	}
	if len(ruled) > 0 {
		why := "network " + spec.Network + " has no egress proxy to add them"
		if spec.Scope {
			why = "a scope's credentials go to it directly"
		}
		spec.Notes = append(spec.Notes, fmt.Sprintf("%s travel in the session's environment: %s", strings.Join(ruled, ", "), why))
	}
	// Every session with an egress proxy trusts its CA: a package group
	// granted live is read at once (egress's registry.go).
	if spec.Intercepts() || spec.Network == sandbox.NetworkAllow {
		dir := sandbox.EgressDirInside // where bwrap binds the proxy's directory
		if spec.Landlock() {
			dir = spec.EgressDir // no bwrap: the command sees the host's path
		}
		// These replace a --ca-file's variables of the same names: the
		// proxy's files hold the session's --ca-file too.
		ca := egress.CAEnv(dir)
		for _, kv := range ca {
			n, _, _ := strings.Cut(kv, "=")
			spec.Env = withoutVar(spec.Env, n)
			if !contains(spec.Pass, n) {
				spec.Pass = append(spec.Pass, n)
			}
		}
		spec.Env = append(spec.Env, ca...)
	}
	return nil
}

// withoutVar is env without the entries of variable name.
func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if n, _, _ := strings.Cut(kv, "="); n != name {
			out = append(out, kv)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
