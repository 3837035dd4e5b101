package credentials

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"mosaic/internal/credvar"
	"mosaic/internal/errcode"
	"mosaic/internal/regfile"

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
	// Aliases give a credential to the command under a second name too,
	// where the agent reads another variable than users set.
	Aliases  map[string]string `json:"credential_aliases,omitempty"`
	PassEnv  []string          `json:"pass_environment,omitempty"`
	ReadOnly []string          `json:"read_only_paths,omitempty"`
	// Toolchains are directories (~/ for the home) bound read-only for the
	// session's PATH, their bin/ (or themselves) on it after the user's.
	Toolchains []string `json:"toolchains,omitempty"`
	// Env are non-secret NAME=VALUE the session gets unless the caller sets
	// the same name (--env, --pass-env): the vendors' switches for
	// non-essential traffic.
	Env []string `json:"environment,omitempty"`
	// Args are inserted after the binary's name when the command is the
	// profile's binary: switches an agent takes only on its command line.
	Args []string `json:"arguments,omitempty"`
	// Endpoints are variables naming the agent's API as a URL (a gateway, a
	// local model): when one is set, its host is allowed too, and an
	// agent that reads no variable for it gets it as arguments (EndpointArgs,
	// with %s standing for the URL).
	Endpoints    []string            `json:"endpoint_variables,omitempty"`
	EndpointArgs map[string][]string `json:"endpoint_arguments,omitempty"`
	// Network is the session's network unless --network says otherwise:
	// none, allow (to AllowHosts, through the egress proxy) or host.
	Network    string   `json:"network"`
	AllowHosts []string `json:"allow_hosts,omitempty"`
	// Ask: hold a connection to a host not on the list for the user's
	// answer (--ask) in network allow.
	Ask bool `json:"ask,omitempty"`
	// Inject are the credentials the egress proxy puts into requests
	// (network allow), which the session then never holds.
	Inject []InjectRule `json:"inject,omitempty"`
	// HostReasons say why each allowed host is on the list.
	HostReasons map[string]string `json:"allow_host_reasons,omitempty"`
	// Tested is the agent's version range this profile was tested with.
	Tested string `json:"tested_versions,omitempty"`
	// SeccompAllow names rows of the session's syscall filter to lift
	// (checked against sandbox.SyscallRules when a session is prepared).
	SeccompAllow []string `json:"seccomp_allow,omitempty"`
	// Sandbox is the session's inner layer unless --sandbox says
	// otherwise: bwrap (the default) or landlock.
	Sandbox string `json:"sandbox,omitempty"`
	// Workspace is the sessions' workspace mode unless --clone says
	// otherwise: clone (their own copy of the repository) or direct.
	Workspace string `json:"workspace,omitempty"`
	// MemoryMax, TasksMax, CPUQuota, TmpSize and HomeSize (the bounds
	// of its /tmp and its home) are the profile's session limits, as the flags take them (a flag
	// wins); checked where they are used.
	MemoryMax string `json:"memory_max,omitempty"`
	TasksMax  string `json:"tasks_max,omitempty"`
	CPUQuota  string `json:"cpu_quota,omitempty"`
	TmpSize   string `json:"tmp_size,omitempty"`
	HomeSize  string `json:"home_size,omitempty"`
	// LendGit are the git credentials its sessions are lent, as
	// --lend-git takes them (https://HOST/OWNER/REPO[=OPS]); checked
	// where they are used (bad-git-lend), where a flag naming the same
	// repository wins.
	LendGit []string `json:"lend_git,omitempty"`
	// LendSSHKey and LendSSHSign are the ssh agent's keys its sessions
	// are lent, as --lend-ssh-key (KEY=HOST[,HOST...]) and --lend-ssh-sign
	// take them, KEY a SHA256: fingerprint or an absolute .pub path; a
	// flag naming the same key (any signing key, for LendSSHSign) wins.
	// Only where the caller's own agent is: not through the bus or --host.
	LendSSHKey  []string `json:"lend_ssh_key,omitempty"`
	LendSSHSign string   `json:"lend_ssh_sign,omitempty"`
}

// The hosts each provider's API is reached at, for the built-in profiles'
// allowlists, with the reason each is there.
var (
	claudeHosts = map[string]string{
		"api.anthropic.com":     "the Anthropic API (the model), and sign-in's token exchange",
		"console.anthropic.com": "sign-in with an Anthropic Console account (mosaic login claude-code)",
		"claude.ai":             "sign-in with a Claude subscription (mosaic login claude-code)",
		"platform.claude.com":   "sign-in, where Claude Code 2.1.332 and later send it (mosaic login claude-code)",
	}
	codexHosts = map[string]string{
		"api.openai.com":  "the OpenAI API (the model)",
		"auth.openai.com": "sign-in with ChatGPT (mosaic login codex)",
		"chatgpt.com":     "the model with a ChatGPT sign-in (its backend API)",
	}
	providerHosts = map[string]string{
		"api.anthropic.com":                 "Anthropic's API (ANTHROPIC_API_KEY)",
		"api.openai.com":                    "OpenAI's API (OPENAI_API_KEY)",
		"generativelanguage.googleapis.com": "Google's Gemini API (GEMINI_API_KEY)",
		"api.groq.com":                      "Groq's API (GROQ_API_KEY)",
		"api.cerebras.ai":                   "Cerebras' API (CEREBRAS_API_KEY)",
		"api.x.ai":                          "xAI's API (XAI_API_KEY)",
		"openrouter.ai":                     "OpenRouter's API (OPENROUTER_API_KEY)",
		"api.z.ai":                          "Z.ai's API (ZAI_API_KEY)",
		"api.mistral.ai":                    "Mistral's API (MISTRAL_API_KEY)",
	}
)

// hostsOf lists the hosts of reasons, sorted.
func hostsOf(reasons map[string]string) []string {
	out := make([]string, 0, len(reasons))
	for h := range reasons {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

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
// tried in order and the first complete one is used. What each agent reads
// and contacts was measured with the versions in Tested (see the agents'
// end-to-end test, TestAgents).
var builtins = []Profile{
	{
		Name: "claude-code", Description: "Anthropic's Claude Code", Binary: "claude", Tested: "2.1.x (2.1.332)",
		CredentialSets: [][]string{{"CLAUDE_CODE_OAUTH_TOKEN"}, {"ANTHROPIC_API_KEY"}, {"ANTHROPIC_AUTH_TOKEN"}},
		PassEnv: []string{"ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL",
			"ANTHROPIC_DEFAULT_HAIKU_MODEL", "CLAUDE_CODE_MAX_OUTPUT_TOKENS"},
		// Without it Claude Code 2.1 opens 3-6 connections to api.anthropic.com
		// besides a custom ANTHROPIC_BASE_URL (telemetry, error reports,
		// update checks); with it, none.
		Env:       []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"},
		Endpoints: []string{"ANTHROPIC_BASE_URL"},
		Network:   "allow", AllowHosts: hostsOf(claudeHosts), HostReasons: claudeHosts,
	},
	{
		Name: "codex", Description: "OpenAI's Codex CLI", Binary: "codex", Tested: "0.171.x (0.171.0)",
		// Codex 0.171 sends no key at all when only OPENAI_API_KEY is set; it
		// reads CODEX_API_KEY.
		CredentialSets: providerSets("CODEX_API_KEY", "OPENAI_API_KEY"),
		Aliases:        map[string]string{"OPENAI_API_KEY": "CODEX_API_KEY"},
		PassEnv:        []string{"CODEX_HOME", "CODEX_CA_CERTIFICATE"},
		// Codex reads these switches only from config.toml or -c: analytics
		// (ab.chatgpt.com), curated plugins (chatgpt.com, github.com,
		// api.github.com) and the update check (api.github.com).
		Args: []string{"-c", "analytics.enabled=false", "-c", "features.plugins=false", "-c", "check_for_update_on_startup=false"},
		// Codex 0.171 ignores OPENAI_BASE_URL. A provider of its own, given
		// with -c, reads the key from CODEX_API_KEY and speaks HTTPS at once
		// (-c openai_base_url= also works, but first tries a WebSocket 7 times).
		Endpoints: []string{"OPENAI_BASE_URL"},
		EndpointArgs: map[string][]string{"OPENAI_BASE_URL": {"-c",
			`model_providers.mosaic={name="mosaic",base_url="%s",env_key="CODEX_API_KEY",wire_api="responses",supports_websockets=false}`,
			"-c", "model_provider=mosaic"}},
		Network: "allow", AllowHosts: hostsOf(codexHosts), HostReasons: codexHosts,
	},
	{
		Name: "pi", Description: "the pi coding agent", Binary: "pi", Tested: "0.73.x (0.73.1)",
		CredentialSets: providerSets("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GROQ_API_KEY",
			"CEREBRAS_API_KEY", "XAI_API_KEY", "OPENROUTER_API_KEY", "ZAI_API_KEY", "MISTRAL_API_KEY"),
		PassEnv: []string{"PI_CODING_AGENT_DIR"},
		// pi.dev: the version check and install telemetry.
		Env:     []string{"PI_OFFLINE=1"},
		Network: "allow", AllowHosts: hostsOf(providerHosts), HostReasons: providerHosts,
	},
	{
		Name: "opencode", Description: "the opencode agent", Binary: "opencode", Tested: "1.18.x (1.18.33)",
		CredentialSets: providerSets("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY",
			"GOOGLE_GENERATIVE_AI_API_KEY", "OPENROUTER_API_KEY", "GROQ_API_KEY", "XAI_API_KEY", "MISTRAL_API_KEY"),
		PassEnv: []string{"OPENCODE_CONFIG", "OPENCODE_CONFIG_CONTENT"},
		// The model catalog (models.opencode.ai) comes with the binary, and
		// no self-update. Its background install of a plugin package from
		// the npm registry (a plugin package) has no switch; refused, it only logs a warning.
		Env:     []string{"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1"},
		Network: "allow", AllowHosts: hostsOf(providerHosts), HostReasons: providerHosts,
	},
	// allow with an empty list: reaches nothing yet, but has an egress
	// proxy, so that `mosaic allow` can grant it a host at any time.
	{Name: Generic, Description: "any command; no credential", Network: "allow"},
}

// Profiles returns the built-in profiles with the user's from dir
// (~/.config/mosaic/profiles) laid over them: a user profile of a built-in's
// name replaces it. Sorted by name. A file that cannot be read is left
// out, with its error among broken (sorted by name): one bad file must not
// hide the others.
func Profiles(dir string) (list []Profile, broken []error) {
	out, bad := usable(dir)
	names := make([]string, 0, len(bad))
	for n := range bad {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		broken = append(broken, bad[n])
	}
	return out, broken
}

// usable is every profile but the user's broken ones, which are returned
// apart by name: one broken file must not stop the sessions of the others.
func usable(dir string) ([]Profile, map[string]error) {
	byName := map[string]Profile{}
	for _, p := range builtins {
		p.Source = "built-in"
		p.Inject = builtinRules(p)
		byName[p.Name] = p
	}
	broken := map[string]error{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.conf"))
	for _, f := range files {
		p, err := readProfile(f)
		if err != nil {
			broken[strings.TrimSuffix(filepath.Base(f), ".conf")] = err
			continue
		}
		byName[p.Name] = p
	}
	out := make([]Profile, 0, len(byName))
	for _, p := range byName {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, broken
}

// warnBroken says on stderr which profiles were left out, and why.
func warnBroken(broken map[string]error) {
	for _, err := range broken {
		fmt.Fprintf(os.Stderr, "mosaic: warning: a profile was left out: %v\n", err)
	}
}

// FindProfile returns the profile called name. Another profile that cannot
// be read is only warned about; the one asked for must be readable.
func FindProfile(dir, name string) (Profile, error) {
	all, broken := usable(dir)
	if err, ok := broken[name]; ok {
		return Profile{}, err
	}
	warnBroken(broken)
	var names []string
	for _, p := range all {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return Profile{}, errcode.UnknownProfile.New("there is no profile %q: use one of %s (see `mosaic profiles`)", name, strings.Join(names, ", "))
}

// ProfileFor picks the profile of a command when none was named: the one
// whose binary the command runs, a user's before a built-in (so a profile
// of yours with Binary=claude wins over claude-code, whatever the names),
// else generic.
func ProfileFor(dir string, command []string) (Profile, error) {
	all, broken := usable(dir)
	warnBroken(broken)
	if len(command) > 0 {
		// A user's profile for the binary wins over the built-in, by rule,
		// not by the order of their names.
		base := filepath.Base(command[0])
		for _, builtIn := range []bool{false, true} {
			for _, p := range all {
				if p.Binary != "" && p.Binary == base && (p.Source == "built-in") == builtIn {
					return p, nil
				}
			}
		}
	}
	if err, ok := broken[Generic]; ok { // the user's own generic replaces the built-in
		return Profile{}, err
	}
	for _, p := range all {
		if p.Name == Generic {
			return p, nil
		}
	}
	return Profile{}, errcode.UnknownProfile.New("there is no profile %q", Generic)
}

// limit is the profile's limit setting of that name (readProfile).
func (p *Profile) limit(name string) *string {
	return map[string]*string{"MemoryMax": &p.MemoryMax, "TasksMax": &p.TasksMax, "CPUQuota": &p.CPUQuota, "TmpSize": &p.TmpSize, "HomeSize": &p.HomeSize}[name]
}

// readProfile reads a profile file in systemd's INI syntax:
//
//	[Profile]
//	Description=My agent
//	Binary=myagent
//	CredentialSet=MY_API_KEY
//	CredentialSet=MY_TOKEN MY_BASE_URL
//	PassEnvironment=MY_MODEL
//	Environment=MY_TELEMETRY=off
//	ReadOnlyPaths=/opt/myagent
//	Toolchain=~/.local/share/zig /opt/jdk-21
//	Network=allow
//	AllowHost=api.example.com api.example.com:8443
//	Inject=MY_API_KEY authorization api.example.com
//	SeccompAllow=io_uring perf
//	Sandbox=landlock
//	LendGit=https://github.com/me/app=fetch,push
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
	f, _, err := regfile.Open(path, false) // a FIFO must not hang every start
	if err != nil {
		return bad("%v", err)
	}
	defer f.Close()
	opts, err := unit.DeserializeOptions(f)
	if err != nil {
		return bad("%v (it is read as a systemd unit file)", err)
	}
	p := Profile{Name: name, Source: path, Network: "allow"} // as generic's: nothing allowed yet
	for _, o := range opts {
		if o.Section != "Profile" {
			return bad("unknown section [%s]: use [Profile]", o.Section)
		}
		if err := p.set(o.Name, o.Value); err != nil {
			return bad("%v", err)
		}
	}
	return p, nil
}

// oneOf sets *v to value if it is one of choices; else its error names
// the setting and the choices ("Network=x: use none, allow or host").
func oneOf(v *string, name, value string, choices ...string) error {
	if !slices.Contains(choices, value) {
		last := len(choices) - 1
		return fmt.Errorf("%s=%s: use %s or %s", name, value, strings.Join(choices[:last], ", "), choices[last])
	}
	*v = value
	return nil
}

// set takes one option of a profile's [Profile] section into p; its error
// says what is wrong with the line (readProfile names the file).
func (p *Profile) set(name, value string) (err error) {
	fields := strings.Fields(value)
	switch name {
	case "Description":
		p.Description = value
	case "Binary":
		p.Binary = value
	case "CredentialSet":
		for _, v := range fields {
			if err := credvar.ValidateName(v); err != nil {
				return fmt.Errorf("CredentialSet: %w", err)
			}
		}
		if len(fields) > 0 {
			p.CredentialSets = append(p.CredentialSets, fields)
		}
	case "PassEnvironment":
		for _, v := range fields {
			if !credvar.IsName(v) {
				return fmt.Errorf("PassEnvironment: %q is not a variable name", v)
			}
		}
		p.PassEnv = append(p.PassEnv, fields...)
	case "Environment":
		n, v, ok := strings.Cut(value, "=")
		if !ok || !credvar.IsName(n) || ValidateValue(n, v, "") != nil {
			return fmt.Errorf("%s=%s: use one NAME=VALUE per line, a plain value", name, value)
		}
		p.Env = append(p.Env, value)
	case "ReadOnlyPaths":
		for _, v := range fields {
			if !filepath.IsAbs(v) {
				return fmt.Errorf("ReadOnlyPaths: %q is not an absolute path", v)
			}
		}
		p.ReadOnly = append(p.ReadOnly, fields...)
	case "Toolchain":
		if p.Toolchains, err = toolchainsOf(p.Toolchains, fields); err != nil {
			return err
		}
	case "Network":
		return oneOf(&p.Network, name, value, "none", "allow", "host")
	case "Sandbox":
		return oneOf(&p.Sandbox, name, value, "bwrap", "landlock")
	case "Workspace":
		return oneOf(&p.Workspace, name, value, "clone", "direct")
	case "AllowHost":
		p.AllowHosts = append(p.AllowHosts, fields...)
	case "Ask":
		var ask string
		err := oneOf(&ask, name, value, "yes", "no")
		p.Ask = ask == "yes"
		return err
	case "Inject":
		r, err := parseInject(value)
		if err != nil {
			return err
		}
		p.Inject = append(p.Inject, r)
	case "SeccompAllow":
		p.SeccompAllow = append(p.SeccompAllow, fields...)
	default:
		return p.setOther(name, value, fields)
	}
	return nil
}

// setOther sets a profile's limit or lend setting (readProfile), or
// refuses a setting no profile takes.
func (p *Profile) setOther(name, value string, fields []string) error {
	switch name {
	case "MemoryMax", "TasksMax", "CPUQuota", "TmpSize", "HomeSize":
		*p.limit(name) = value
	case "LendGit":
		// The rest of the syntax is --lend-git's, read where it is used.
		for _, v := range fields {
			if !strings.HasPrefix(v, "https://") {
				return fmt.Errorf("LendGit=%s: use https://HOST[:PORT]/OWNER/REPO[=OPS], as --lend-git takes it", v)
			}
		}
		p.LendGit = append(p.LendGit, fields...)
	case "LendSSHKey", "LendSSHSign":
		return p.setSSHLend(name, fields)
	default:
		return fmt.Errorf("unknown setting %s= (known: Description, Binary, CredentialSet, PassEnvironment, Environment, ReadOnlyPaths, Toolchain, Network, AllowHost, Ask, SeccompAllow, Sandbox, Workspace, Inject, MemoryMax, TasksMax, CPUQuota, TmpSize, HomeSize, LendGit, LendSSHKey, LendSSHSign)", name)
	}
	return nil
}

// setSSHLend reads a LendSSHKey= (KEY=HOST[,HOST...], one or more) or
// LendSSHSign= (one KEY, once) line: KEY a SHA256: fingerprint or an
// absolute path of a .pub file (a profile has no directory to be relative
// to); the key and hosts themselves are checked where they are used.
func (p *Profile) setSSHLend(name string, fields []string) error {
	if len(fields) == 0 {
		return fmt.Errorf("%s= names no key", name)
	}
	for _, v := range fields {
		key, hosts, hasHosts := strings.Cut(v, "=")
		switch {
		case !strings.HasPrefix(key, "SHA256:") && !filepath.IsAbs(key):
			return fmt.Errorf("%s=%s: name the key by its SHA256: fingerprint or the absolute path of its .pub file", name, v)
		case name == "LendSSHKey" && (!hasHosts || hosts == ""):
			return fmt.Errorf("LendSSHKey=%s: write KEY=HOST[,HOST...], where it may log in (a key only to sign is LendSSHSign=)", v)
		case name == "LendSSHSign" && (hasHosts || len(fields) != 1 || p.LendSSHSign != ""):
			return fmt.Errorf("LendSSHSign=%s: name one key, once (git signs with one)", strings.Join(fields, " "))
		}
	}
	if name == "LendSSHSign" {
		p.LendSSHSign = fields[0]
	} else {
		p.LendSSHKey = append(p.LendSSHKey, fields...)
	}
	return nil
}

// toolchainsOf adds a Toolchain= line's directories to have: each
// absolute, or under ~/.
func toolchainsOf(have, fields []string) ([]string, error) {
	for _, v := range fields {
		if !filepath.IsAbs(v) && !strings.HasPrefix(v, "~/") {
			return nil, fmt.Errorf("a Toolchain= of %q is neither an absolute path nor one under ~/", v)
		}
	}
	return append(have, fields...), nil
}

func validProfileName(name string) error {
	if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return fmt.Errorf("the file name must be NAME.conf with NAME of a-z 0-9 -")
	}
	return nil
}
