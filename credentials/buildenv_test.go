package credentials

import (
	"slices"
	"strings"
	"testing"
)

// TestBuildSettingsPass (issue 40): the user's exported build settings
// reach the session by default; one whose value looks like a credential
// does not, and is named (never its value); --env and a credential of the
// same name win over the launching environment's.
func TestBuildSettingsPass(t *testing.T) {
	g, err := Resolve(Request{Command: []string{"sh"}, ProfileDir: t.TempDir(), Env: []string{"CC=clang"}, Credentials: []string{"GONOSUMDB"},
		LookupEnv: env(map[string]string{
			"GOFLAGS": "-mod=mod -tags=tokenizer", "GOPROXY": "https://proxy.golang.org,direct", "CC": "gcc",
			"PIP_INDEX_URL": "https://ann:hunter2@pypi.example.com/simple", "GOPRIVATE": "https://tok3n@git.example.com",
			"RUSTFLAGS": "-C link-arg=-Wl,--build-id --cfg api_token=abc", "GONOSUMDB": "x", "SOMETHING_ELSE": "y",
		})})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GOFLAGS=-mod=mod -tags=tokenizer", "GOPROXY=https://proxy.golang.org,direct", "CC=clang"} {
		if !slices.Contains(g.PassEnv, want) {
			t.Errorf("%s not passed: %q", want, g.PassEnv)
		}
	}
	for _, not := range []string{"CC=gcc", "SOMETHING_ELSE=y", "GONOSUMDB=x"} {
		if slices.Contains(g.PassEnv, not) {
			t.Errorf("%s passed: %q", not, g.PassEnv)
		}
	}
	if want := []string{"GOPRIVATE", "RUSTFLAGS", "PIP_INDEX_URL"}; !sameSet(g.Dropped, want) {
		t.Errorf("dropped %q, want %q", g.Dropped, want)
	}
	notes := strings.Join(g.Notes, "\n")
	if strings.Contains(notes, "hunter2") || strings.Contains(notes, "tok3n") || strings.Contains(notes, "abc") || !strings.Contains(notes, "PIP_INDEX_URL of your environment was not passed") {
		t.Errorf("notes: %s", notes)
	}
}

// TestBuildSettingUnpassable: a build setting whose value an environment
// file cannot hold (a newline) is dropped and named, and its note does not
// send the user to --credential, which refuses the same value. Before, it
// did.
func TestBuildSettingUnpassable(t *testing.T) {
	g, err := Resolve(Request{Command: []string{"sh"}, ProfileDir: t.TempDir(),
		LookupEnv: env(map[string]string{"GOFLAGS": "-a\n-toolexec=/x"})})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.Dropped, []string{"GOFLAGS"}) || len(g.Notes) != 1 || strings.Contains(g.Notes[0], "--credential") || strings.Contains(g.Notes[0], "toolexec") {
		t.Errorf("dropped %q, notes %q", g.Dropped, g.Notes)
	}
}

// TestBuildEnvGiven (issue 40): a BuildEnv given (a launch through the
// bus) is where the build settings come from, not the launching
// environment (the bus's own), even empty; its credential-looking value is
// dropped and named as one of the environment's would be. BuildEnvOf and
// BuildEnvIn take only the BuildSettings.
func TestBuildEnvGiven(t *testing.T) {
	own := env(map[string]string{"GOFLAGS": "-tags=bus-own", "CFLAGS": "-bus-own"})
	g, err := Resolve(Request{Command: []string{"sh"}, ProfileDir: t.TempDir(), LookupEnv: own,
		BuildEnv: map[string]string{"GOFLAGS": "-tags=asker", "GOPROXY": "https://ann:hunter2@proxy.example"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.PassEnv, []string{"GOFLAGS=-tags=asker"}) || !slices.Equal(g.Dropped, []string{"GOPROXY"}) {
		t.Errorf("given: passed %q, dropped %q", g.PassEnv, g.Dropped)
	}
	if g, err := Resolve(Request{Command: []string{"sh"}, ProfileDir: t.TempDir(), LookupEnv: own, BuildEnv: map[string]string{}}); err != nil || len(g.PassEnv) != 0 {
		t.Errorf("an empty BuildEnv: passed %q (%v), want none of the launching environment's", g.PassEnv, err)
	}
	if got := BuildEnvOf(env(map[string]string{"GOFLAGS": "x", "HOME": "/h"})); len(got) != 1 || got["GOFLAGS"] != "x" {
		t.Errorf("BuildEnvOf: %q", got)
	}
	if got := BuildEnvIn([]string{"CC=gcc", "PATH=/bin", "ANTHROPIC_MODEL=m"}); len(got) != 1 || got["CC"] != "gcc" {
		t.Errorf("BuildEnvIn: %q", got)
	}
}

// TestCredentialIn: which values look like they carry a credential.
func TestCredentialIn(t *testing.T) {
	for v, want := range map[string]bool{
		"https://proxy.golang.org,direct":        false,
		"https://user:pass@proxy.example.com":    true,
		"https://TOKEN@proxy.example.com|direct": true,
		"https://proxy.example.com/a@b":          false,
		"-ldflags=-X main.apiToken=xyz":          true,
		"--password:x":                           true,
		"-tags=tokenizer,secrets":                false,
		"git.example.com/*,github.com/secretorg": false,
		"//registry.npmjs.org/:_authToken=abc":   true,
		"-j8":                                    false,
	} {
		if got := credentialIn(v) != ""; got != want {
			t.Errorf("credentialIn(%q) = %q, want a credential: %v", v, credentialIn(v), want)
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
