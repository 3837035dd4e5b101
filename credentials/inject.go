package credentials

import (
	"fmt"
	"net/url"
	"strings"

	"mosaic/internal/credvar"
)

// InjectRule says that a credential never enters the session: the session
// holds a placeholder, and the egress proxy puts the value into Headers of
// the requests to Hosts (and to the host of the URL in BaseURLVar, when
// that variable is set). It applies to sessions with network allow.
type InjectRule struct {
	Var        string   `json:"credential"`
	Headers    []string `json:"headers"`
	Hosts      []string `json:"hosts"`
	BaseURLVar string   `json:"base_url_variable,omitempty"`
}

// vendorRules are how each vendor's API takes its keys: Anthropic's
// x-api-key (API keys) or Authorization: Bearer (OAuth tokens, and
// gateways); OpenAI's and the OpenAI-compatible providers' Authorization:
// Bearer; Google's x-goog-api-key. A built-in profile gets the rule of
// each credential its sets name.
var vendorRules = map[string]InjectRule{
	"ANTHROPIC_API_KEY":            {Headers: []string{"x-api-key", "authorization"}, Hosts: []string{"api.anthropic.com"}, BaseURLVar: "ANTHROPIC_BASE_URL"},
	"CLAUDE_CODE_OAUTH_TOKEN":      {Headers: []string{"authorization"}, Hosts: []string{"api.anthropic.com"}, BaseURLVar: "ANTHROPIC_BASE_URL"},
	"ANTHROPIC_AUTH_TOKEN":         {Headers: []string{"authorization"}, Hosts: []string{"api.anthropic.com"}, BaseURLVar: "ANTHROPIC_BASE_URL"},
	"OPENAI_API_KEY":               {Headers: []string{"authorization"}, Hosts: []string{"api.openai.com"}, BaseURLVar: "OPENAI_BASE_URL"},
	"CODEX_API_KEY":                {Headers: []string{"authorization"}, Hosts: []string{"api.openai.com"}, BaseURLVar: "OPENAI_BASE_URL"},
	"GEMINI_API_KEY":               {Headers: []string{"x-goog-api-key"}, Hosts: []string{"generativelanguage.googleapis.com"}},
	"GOOGLE_GENERATIVE_AI_API_KEY": {Headers: []string{"x-goog-api-key"}, Hosts: []string{"generativelanguage.googleapis.com"}},
	"GROQ_API_KEY":                 {Headers: []string{"authorization"}, Hosts: []string{"api.groq.com"}},
	"CEREBRAS_API_KEY":             {Headers: []string{"authorization"}, Hosts: []string{"api.cerebras.ai"}},
	"XAI_API_KEY":                  {Headers: []string{"authorization"}, Hosts: []string{"api.x.ai"}},
	"OPENROUTER_API_KEY":           {Headers: []string{"authorization"}, Hosts: []string{"openrouter.ai"}},
	"ZAI_API_KEY":                  {Headers: []string{"authorization"}, Hosts: []string{"api.z.ai"}},
	"MISTRAL_API_KEY":              {Headers: []string{"authorization"}, Hosts: []string{"api.mistral.ai"}},
}

// builtinRules are the rules of a built-in profile: its credentials' vendors'.
func builtinRules(p Profile) []InjectRule {
	var out []InjectRule
	seen := map[string]bool{}
	for _, set := range p.CredentialSets {
		for _, v := range set {
			if r, ok := vendorRules[v]; ok && !seen[v] {
				seen[v] = true
				r.Var = v
				out = append(out, r)
			}
		}
	}
	return out
}

// parseInject reads a profile's Inject= line: VAR HEADER[,HEADER] HOST[:PORT]...
func parseInject(value string) (InjectRule, error) {
	f := strings.Fields(value)
	if len(f) < 3 {
		//lint:ignore ST1005 it begins with the profile's key as the user wrote it
		return InjectRule{}, fmt.Errorf("Inject=%s: use Inject=VAR HEADER[,HEADER] HOST[:PORT]... (e.g. Inject=MY_API_KEY authorization api.example.com)", value)
	}
	if err := credvar.ValidateName(f[0]); err != nil {
		return InjectRule{}, err
	}
	return InjectRule{Var: f[0], Headers: strings.Split(f[1], ","), Hosts: f[2:]}, nil
}

// RuleFor returns the rule of the credential name in p, with the host of
// its base URL (read by lookup) among its hosts, or false.
func (p Profile) RuleFor(name string, lookup func(string) (string, bool)) (InjectRule, bool) {
	for _, r := range p.Inject {
		if r.Var != name {
			continue
		}
		r.Hosts = append([]string{}, r.Hosts...)
		if r.BaseURLVar != "" {
			if v, ok := lookup(r.BaseURLVar); ok {
				if h := baseURLHost(v); h != "" {
					r.Hosts = append(r.Hosts, h)
				}
			}
		}
		return r, true
	}
	return InjectRule{}, false
}

// baseURLHost is the host:port of a base URL that a key may be injected
// into, with the URL's path when it has one (host:port/tenant-a: the key
// goes only to requests under it): any https:// host, and the host's
// loopback over plain http:// (a local gateway: the request never leaves
// the machine, and the egress proxy relays plain HTTP nowhere else). ""
// for anything else: a key is never sent in clear across a network. The
// path is as written (EscapedPath); the egress proxy's rule refuses one
// that is not plain.
func baseURLHost(v string) string {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		return ""
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	switch {
	case u.Scheme == "https":
		return u.Host + path
	case u.Scheme == "http" && u.Hostname() == "localhost":
		if u.Port() == "" {
			return u.Host + ":80" + path
		}
		return u.Host + path
	}
	return ""
}
