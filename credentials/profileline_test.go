package credentials

import (
	"os"
	"path/filepath"
	"testing"
)

// A bad line of a profile is refused with the file named and what the
// setting takes; a good one is read.
func TestProfileLineRefusals(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.conf")
	for line, want := range map[string]string{
		"Network=some":       "Network=some: use none, allow or host",
		"Sandbox=docker":     "Sandbox=docker: use bwrap or landlock",
		"Workspace=shared":   "Workspace=shared: use clone or direct",
		"Ask=maybe":          "Ask=maybe: use yes or no",
		"Environment=A":      "Environment=A: use one NAME=VALUE per line, a plain value",
		"ReadOnlyPaths=rel":  `ReadOnlyPaths: "rel" is not an absolute path`,
		"PassEnvironment=1x": `PassEnvironment: "1x" is not a variable name`,
		"Ask=yes":            "",
		"Network=none":       "",
	} {
		if err := os.WriteFile(path, []byte("[Profile]\n"+line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := readProfile(path)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", line, err)
		case want != "" && (err == nil || err.Error() != "profile "+path+": "+want):
			t.Errorf("%s: %v, want %q", line, err, want)
		case line == "Ask=yes" && !p.Ask, line == "Network=none" && p.Network != "none":
			t.Errorf("%s: read as %+v", line, p)
		}
	}
}
