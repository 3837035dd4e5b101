package credentials

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strings"

	"mosaic/internal/credvar"
	"mosaic/internal/errcode"
)

// NoKeyNeeded reports whether command only asks an agent about itself
// (`claude --version`, `codex --help`), which needs no credential.
func NoKeyNeeded(command []string) bool {
	if len(command) != 2 {
		return false
	}
	switch command[1] {
	case "--version", "-v", "-V", "version", "--help", "-h", "help":
		return true
	}
	return false
}

// plain gathers the session's non-secret variables: the profile's
// defaults (Env), the profile's PassEnvironment and endpoints that are set
// in the launching environment, --pass-env and --env, later ones winning,
// and the BuildSettings of the launching environment none of them gives.
// A name that is also a credential of the session is refused: a variable
// is passed one way, and a secret never as a plain one.
func (g *Grant) plain(req Request, lookup func(string) (string, bool), secret map[string]int) error {
	vals := map[string]string{}
	var order []string
	set := func(name, value string) {
		if _, ok := vals[name]; !ok {
			order = append(order, name)
		}
		vals[name] = value
	}
	p := g.Profile
	for _, kv := range p.Env {
		n, v, _ := strings.Cut(kv, "=")
		set(n, v)
	}
	for _, name := range append(append([]string{}, p.PassEnv...), p.Endpoints...) {
		if _, isSecret := secret[name]; isSecret {
			continue
		}
		if v, ok := lookup(name); ok && ValidateValue(name, v, "") == nil {
			set(name, v)
		}
	}
	for _, name := range req.PassEnv {
		if err := validPlainName("--pass-env", name); err != nil {
			return err
		}
		v, ok := lookup(name)
		if !ok {
			return errcode.BadEnv.New("--pass-env %s: %s is not set in your environment: export it, or give it with --env %s=VALUE", name, name, name)
		}
		if err := ValidateValue(name, v, "from your environment"); err != nil {
			return errcode.BadEnv.New("--pass-env %s: %w", name, err)
		}
		set(name, v)
	}
	for _, kv := range req.Env {
		n, v, ok := strings.Cut(kv, "=")
		if !ok {
			return errcode.BadEnv.New("--env %q: use NAME=VALUE", kv)
		}
		if err := validPlainName("--env", n); err != nil {
			return err
		}
		if err := ValidateValue(n, v, "from --env"); err != nil {
			return errcode.BadEnv.New("--env %s: %w", n, err)
		}
		set(n, v)
	}
	build := lookup
	if req.BuildEnv != nil {
		build = func(name string) (string, bool) { v, ok := req.BuildEnv[name]; return v, ok }
	}
	for _, kv := range g.buildSettings(build, vals, secret) {
		n, v, _ := strings.Cut(kv, "=")
		set(n, v)
	}
	for _, name := range order {
		if _, isSecret := secret[name]; isSecret {
			return errcode.BadEnv.New("%s is a credential of this session (from its profile, --credential or --env-file): pass it one way only, as a credential", name)
		}
		g.PassEnv = append(g.PassEnv, name+"="+vals[name])
	}
	if err := g.endpoints(vals); err != nil {
		return err
	}
	if len(req.Command) > 0 && p.Binary != "" && filepath.Base(req.Command[0]) == p.Binary && !NoKeyNeeded(req.Command) {
		g.Args = append(append([]string{}, p.Args...), g.Args...)
	} else {
		g.Args = nil
	}
	sort.Strings(g.Allow)
	return nil
}

// endpoints allows the hosts of the profile's endpoints (their values in
// vals, the plain variables, or among the secrets), and gives an agent
// that reads no variable for one its value as arguments.
func (g *Grant) endpoints(vals map[string]string) error {
	p := g.Profile
	for _, name := range p.Endpoints {
		v, ok := vals[name]
		if !ok {
			for _, s := range g.Secrets {
				if s.Name == name {
					v, ok = s.Value, true
				}
			}
		}
		if !ok || v == "" {
			continue
		}
		host, err := EndpointHost(v)
		if err != nil {
			return errcode.BadEnv.New("%s=%s: %w", name, v, err)
		}
		g.Allow = append(g.Allow, host)
		note := fmt.Sprintf("%s names %s: the session may reach it", name, host)
		for _, a := range p.EndpointArgs[name] {
			g.Args = append(g.Args, strings.ReplaceAll(a, "%s", v))
		}
		if len(p.EndpointArgs[name]) > 0 {
			note += fmt.Sprintf(" (%s reads no variable for it: given as %s)", p.Binary, strings.Join(p.EndpointArgs[name], " "))
		}
		g.Notes = append(g.Notes, note)
	}
	return nil
}

// EndpointHost reads an API's base URL and returns the --allow-host entry
// that reaches it: host:port, the port from the scheme unless given.
func EndpointHost(raw string) (string, error) {
	if strings.ContainsAny(raw, "\"\\ \t'") {
		return "", fmt.Errorf("a URL has no quotes, backslashes or spaces")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "", fmt.Errorf("not an http(s) URL with a host (e.g. https://gateway.example.com/v1)")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port), nil
}

// setInside are the variables mosaic's init sets in every session itself,
// which a non-secret variable cannot change; PATH is not among them: the
// session's PATH is worked out from the one given (request.sessionPath).
var setInside = map[string]string{
	"HOME":          "the session's own home",
	"TMPDIR":        "the session's own /tmp",
	"NOTIFY_SOCKET": "systemd's, for the session's init",
}

// validPlainName checks the name of a non-secret variable (--env NAME=,
// --pass-env NAME).
func validPlainName(flag, name string) error {
	if !credvar.IsName(name) {
		return errcode.BadEnv.New("%s %q: a variable name is letters, digits and _, not starting with a digit", flag, name)
	}
	if what, ok := setInside[name]; ok {
		return errcode.BadEnv.New("%s %s: mosaic sets %s in every session itself (%s)", flag, name, name, what)
	}
	if strings.HasPrefix(name, "MOSAIC_") {
		return errcode.BadEnv.New("%s %s: MOSAIC_ variables are mosaic's own in a session (MOSAIC_SESSION names it)", flag, name)
	}
	return nil
}
