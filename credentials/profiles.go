package credentials

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"mosaic/units/errcode"

	"github.com/coreos/go-systemd/v22/unit"
)

// Profile describes what one agent harness needs: the credential sets it can
// sign in with (any one complete set will do), the non-secret variables it
// reads, its binary, and extra read-only paths.
type Profile struct {
	Name           string     `json:"name"`
	Description    string     `json:"description"`
	Source         string     `json:"source"` // "built-in" or the file it came from
	Binary         string     `json:"binary,omitempty"`
	CredentialSets [][]string `json:"credential_sets"`
	PassEnv        []string   `json:"pass_environment,omitempty"`
	ReadOnly       []string   `json:"read_only_paths,omitempty"`
	// Network is the session's network unless --network says otherwise:
	// none, allow (to AllowHosts, through the egress proxy) or host.
	Network    string   `json:"network"`
	AllowHosts []string `json:"allow_hosts,omitempty"`
	// SeccompAllow names rows of the session's syscall filter to lift
	// (checked against sandbox.SyscallRules when a session is prepared).
	SeccompAllow []string `json:"seccomp_allow,omitempty"`
	// Sandbox is the session's inner layer unless --sandbox says
	// otherwise: bwrap (the default) or landlock.
	Sandbox string `json:"sandbox,omitempty"`
}

// The hosts each provider's API is reached at, for the built-in profiles'
// allowlists.
var (
	claudeHosts   = []string{"api.anthropic.com", "console.anthropic.com", "claude.ai", "statsig.anthropic.com", "sentry.io"}
	codexHosts    = []string{"api.openai.com", "auth.openai.com", "chatgpt.com"}
	providerHosts = []string{"api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com", "api.groq.com",
		"api.cerebras.ai", "api.x.ai", "openrouter.ai", "api.z.ai", "api.mistral.ai"}
)

// Generic is the profile of a command that needs no credential.
const Generic = "generic"

func providerSets(names ...string) [][]string {
	sets := make([][]string, len(names))
	for i, n := range names {
		sets[i] = []string{n}
	}
	return sets
}

// builtins are the harnesses mosaic knows. Each set is all-of; the sets are
// tried in order and the first complete one is used.
var builtins = []Profile{
	{
		Name: "claude-code", Description: "Anthropic's Claude Code", Binary: "claude",
		CredentialSets: [][]string{{"CLAUDE_CODE_OAUTH_TOKEN"}, {"ANTHROPIC_API_KEY"}, {"ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"}},
		PassEnv:        []string{"ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL", "CLAUDE_CODE_MAX_OUTPUT_TOKENS", "DISABLE_AUTOUPDATER"},
		// The API, and sign-in, telemetry and error reports.
		Network: "allow", AllowHosts: claudeHosts,
	},
	{
		Name: "codex", Description: "OpenAI's Codex CLI", Binary: "codex",
		CredentialSets: providerSets("OPENAI_API_KEY", "CODEX_API_KEY"),
		PassEnv:        []string{"OPENAI_BASE_URL", "CODEX_HOME"},
		// The API, and ChatGPT sign-in.
		Network: "allow", AllowHosts: codexHosts,
	},
	{
		Name: "pi", Description: "the pi coding agent", Binary: "pi",
		CredentialSets: providerSets("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GROQ_API_KEY",
			"CEREBRAS_API_KEY", "XAI_API_KEY", "OPENROUTER_API_KEY", "ZAI_API_KEY", "MISTRAL_API_KEY"),
		Network: "allow", AllowHosts: providerHosts,
	},
	{
		Name: "opencode", Description: "the opencode agent", Binary: "opencode",
		CredentialSets: providerSets("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY",
			"GOOGLE_GENERATIVE_AI_API_KEY", "OPENROUTER_API_KEY", "GROQ_API_KEY", "XAI_API_KEY", "MISTRAL_API_KEY"),
		Network: "allow", AllowHosts: append([]string{"models.dev"}, providerHosts...),
	},
	{Name: Generic, Description: "any command; no credential", Network: "none"},
}

// Profiles returns the built-in profiles with the user's from dir
// (~/.config/mosaic/profiles) laid over them: a user profile of a built-in's
// name replaces it. Sorted by name.
func Profiles(dir string) ([]Profile, error) {
	byName := map[string]Profile{}
	for _, p := range builtins {
		p.Source = "built-in"
		byName[p.Name] = p
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.conf"))
	for _, f := range files {
		p, err := readProfile(f)
		if err != nil {
			return nil, err
		}
		byName[p.Name] = p
	}
	out := make([]Profile, 0, len(byName))
	for _, p := range byName {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// FindProfile returns the profile called name.
func FindProfile(dir, name string) (Profile, error) {
	all, err := Profiles(dir)
	if err != nil {
		return Profile{}, err
	}
	var names []string
	for _, p := range all {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return Profile{}, errcode.UnknownProfile.New("there is no profile %q: use one of %s (see `mosaic profiles`)", name, strings.Join(names, ", "))
}

// ProfileFor picks the profile of a command when none was named: the
// built-in whose binary the command runs, else generic.
func ProfileFor(dir string, command []string) (Profile, error) {
	if len(command) > 0 {
		base := filepath.Base(command[0])
		all, err := Profiles(dir)
		if err != nil {
			return Profile{}, err
		}
		for _, p := range all {
			if p.Binary != "" && p.Binary == base {
				return p, nil
			}
		}
	}
	return FindProfile(dir, Generic)
}

// readProfile reads a profile file in systemd's INI syntax:
//
//	[Profile]
//	Description=My agent
//	Binary=myagent
//	CredentialSet=MY_API_KEY
//	CredentialSet=MY_TOKEN MY_BASE_URL
//	PassEnvironment=MY_MODEL
//	ReadOnlyPaths=/opt/myagent
//	Network=allow
//	AllowHost=api.example.com api.example.com:8443
//	SeccompAllow=io_uring perf
//	Sandbox=landlock
//
// Without Network= a user profile's sessions have no network (none).
// Each CredentialSet line is one alternative; its variables are all needed.
func readProfile(path string) (Profile, error) {
	name := strings.TrimSuffix(filepath.Base(path), ".conf")
	bad := func(format string, args ...any) (Profile, error) {
		return Profile{}, errcode.BadProfile.New("profile %s: %s", path, fmt.Sprintf(format, args...))
	}
	if err := validProfileName(name); err != nil {
		return bad("%v", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return bad("%v", err)
	}
	defer f.Close()
	opts, err := unit.DeserializeOptions(f)
	if err != nil {
		return bad("%v (it is read as a systemd unit file)", err)
	}
	p := Profile{Name: name, Source: path, Network: "none"}
	for _, o := range opts {
		if o.Section != "Profile" {
			return bad("unknown section [%s]: use [Profile]", o.Section)
		}
		fields := strings.Fields(o.Value)
		switch o.Name {
		case "Description":
			p.Description = o.Value
		case "Binary":
			p.Binary = o.Value
		case "CredentialSet":
			for _, v := range fields {
				if err := ValidateName(v); err != nil {
					return bad("CredentialSet: %v", err)
				}
			}
			if len(fields) > 0 {
				p.CredentialSets = append(p.CredentialSets, fields)
			}
		case "PassEnvironment":
			for _, v := range fields {
				if !namePattern.MatchString(v) {
					return bad("PassEnvironment: %q is not a variable name", v)
				}
			}
			p.PassEnv = append(p.PassEnv, fields...)
		case "ReadOnlyPaths":
			for _, v := range fields {
				if !filepath.IsAbs(v) {
					return bad("ReadOnlyPaths: %q is not an absolute path", v)
				}
			}
			p.ReadOnly = append(p.ReadOnly, fields...)
		case "Network":
			if o.Value != "none" && o.Value != "allow" && o.Value != "host" {
				return bad("Network=%s: use none, allow or host", o.Value)
			}
			p.Network = o.Value
		case "Sandbox":
			if o.Value != "bwrap" && o.Value != "landlock" {
				return bad("Sandbox=%s: use bwrap or landlock", o.Value)
			}
			p.Sandbox = o.Value
		case "AllowHost":
			p.AllowHosts = append(p.AllowHosts, fields...)
		case "SeccompAllow":
			p.SeccompAllow = append(p.SeccompAllow, fields...)
		default:
			return bad("unknown setting %s= (known: Description, Binary, CredentialSet, PassEnvironment, ReadOnlyPaths, Network, AllowHost, SeccompAllow, Sandbox)", o.Name)
		}
	}
	return p, nil
}

func validProfileName(name string) error {
	if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return fmt.Errorf("the file name must be NAME.conf with NAME of a-z 0-9 -")
	}
	return nil
}
