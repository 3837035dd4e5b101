package credentials

import (
	"os"
	"path/filepath"
	"strings"

	"mosaic/internal/credvar"
	"mosaic/internal/errcode"
	"mosaic/internal/xdg"
)

// Request is what the caller asked for: a profile (empty: picked from the
// command), variables named with --credential, and --env-file files.
type Request struct {
	Profile     string
	Credentials []string
	EnvFiles    []string
	ProfileDir  string   // ~/.config/mosaic/profiles
	Command     []string // to pick the profile when none is named
	Env         []string // --env NAME=VALUE: non-secret, set for the session
	PassEnv     []string // --pass-env NAME: non-secret, from the launching environment
	// SignIn asks for no credential: the agent signs in inside the session.
	SignIn bool
	// LookupEnv reads the launching environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// BuildEnv, when not nil, is where the BuildSettings come from instead
	// of the launching environment: a launch through the bus, whose own
	// environment is the service's, not the asker's (the asking shell's
	// settings, or those the launching session was given at its start).
	BuildEnv map[string]string
}

// Grant is what a session gets: the credentials (secret, for its
// environment file only) and the profile's non-secret variables.
type Grant struct {
	Profile Profile
	Secrets []credvar.Var // every credential, in a stable order
	PassEnv []string      // NAME=VALUE of every non-secret variable (profile, --env, --pass-env)
	Set     []string      // the credential set that was used, if the profile has any
	// Allow are hosts the session's endpoints (a custom base URL) need,
	// with Notes saying so; Args go after the binary's name (Profile.Args).
	Allow []string
	Notes []string
	Args  []string
	// Dropped are the BuildSettings of the launching environment not
	// passed, their values looking like credentials (names only).
	Dropped []string
}

// Names are the credentials' names, which may appear anywhere (unlike values).
func (g Grant) Names() []string {
	n := make([]string, len(g.Secrets))
	for i, v := range g.Secrets {
		n[i] = v.Name
	}
	return n
}

// Resolve finds the session's credentials: every variable of every
// --env-file, every --credential VAR from the launching environment, and
// the first complete credential set of the profile, looked up in the
// --env-files first, then in the launching environment. Nothing is read but
// what is named.
func Resolve(req Request) (Grant, error) {
	lookup := req.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var p Profile
	var err error
	if req.Profile != "" {
		p, err = FindProfile(req.ProfileDir, req.Profile)
	} else {
		p, err = ProfileFor(req.ProfileDir, req.Command)
	}
	if err != nil {
		return Grant{}, err
	}
	g := Grant{Profile: p}
	have := map[string]int{} // name -> index in g.Secrets
	add := func(v credvar.Var) {
		if i, ok := have[v.Name]; ok {
			g.Secrets[i] = v
			return
		}
		have[v.Name] = len(g.Secrets)
		g.Secrets = append(g.Secrets, v)
	}
	fromFiles := map[string]string{}
	for _, f := range req.EnvFiles {
		vars, err := ReadEnvFile(f)
		if err != nil {
			return Grant{}, err
		}
		for _, v := range vars {
			fromFiles[v.Name] = v.Value
			add(v)
		}
	}
	for _, name := range req.Credentials {
		if err := credvar.ValidateName(name); err != nil {
			return Grant{}, err
		}
		value, ok := lookup(name)
		if !ok {
			return Grant{}, errcode.NoSessionCredential.New("--credential %s: %s is not set in your environment: export it, or put it in a 0600 file passed with --env-file", name, name)
		}
		if err := ValidateValue(name, value, "from your environment"); err != nil {
			return Grant{}, err
		}
		add(credvar.Var{Name: name, Value: value})
	}
	if len(p.CredentialSets) > 0 && !req.SignIn && !NoKeyNeeded(req.Command) {
		set, vars, err := firstCompleteSet(p, fromFiles, lookup)
		if err != nil {
			return Grant{}, err
		}
		if set == nil {
			return Grant{}, errcode.NoSessionCredential.New("profile %s needs one of these credential sets: %s; none is complete in %s. Set one, or sign in inside a session that keeps it: mosaic run --sign-in --name NAME -- %s",
				p.Name, describeSets(p.CredentialSets), where(req.EnvFiles), p.Binary)
		}
		g.Set = set
		for _, v := range vars {
			add(v)
		}
		for _, v := range vars {
			if alias, ok := p.Aliases[v.Name]; ok {
				if _, set := have[alias]; !set {
					add(credvar.Var{Name: alias, Value: v.Value})
				}
			}
		}
	}
	if err := g.plain(req, lookup, have); err != nil {
		return Grant{}, err
	}
	return g, nil
}

func firstCompleteSet(p Profile, fromFiles map[string]string, lookup func(string) (string, bool)) ([]string, []credvar.Var, error) {
	for _, set := range p.CredentialSets {
		var vars []credvar.Var
		for _, name := range set {
			v, ok := fromFiles[name]
			where := "from --env-file"
			if !ok {
				v, ok = lookup(name)
				where = "from your environment"
			}
			if !ok || v == "" {
				vars = nil
				break
			}
			if err := ValidateValue(name, v, where); err != nil {
				return nil, nil, err
			}
			vars = append(vars, credvar.Var{Name: name, Value: v})
		}
		if vars != nil {
			return set, vars, nil
		}
	}
	return nil, nil, nil
}

func describeSets(sets [][]string) string {
	s := make([]string, len(sets))
	for i, set := range sets {
		s[i] = strings.Join(set, "+")
	}
	return strings.Join(s, " | ")
}

func where(files []string) string {
	if len(files) == 0 {
		return "your environment"
	}
	return "--env-file " + strings.Join(files, ", ") + " and your environment"
}

// ProfileDir is where the user's profiles live: $XDG_CONFIG_HOME/mosaic/profiles.
func ProfileDir(home string) string {
	return filepath.Join(xdg.ConfigHome(home, os.Getenv), "mosaic", "profiles")
}
