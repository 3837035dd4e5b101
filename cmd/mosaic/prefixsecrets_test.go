package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A toolchain on the user's PATH is bound read-only where it is installed,
// but not the files of its prefix that a tool reads as configuration and
// that can carry a credential (issue 40): nvm's node keeps npm's global
// config, where `npm config set --location=global` writes a registry token,
// at PREFIX/etc/npmrc. Neither that file, present at the start, nor one
// the host writes into the prefix while the session runs (yarn's
// etc/yarnrc, pip's pip.conf) is readable inside, in each sandbox mode:
// the service's bwrap, a --scope's, and --sandbox landlock's rules; node's
// bin/ still is. The same holds where the command itself is a script of a
// package in that node (an agent installed with npm -g, whose #! names
// node: its install is bound for it). The weakened build (the whole prefix
// bound, as before) shows the token read first.
func TestPrefixSecretsHidden(t *testing.T) {
	needRig(t)
	home := homeDir()
	prefix := filepath.Join(home, ".nvm/versions/node/v97.0.0-secrets")
	t.Cleanup(func() { os.RemoveAll(filepath.Join(home, ".nvm")) })
	copyFile(t, "/bin/sh", filepath.Join(prefix, "bin/node"), 0o755)
	writeFile(t, filepath.Join(prefix, "lib/node_modules/npm/package.json"), "{}\n")
	path := strings.Join([]string{filepath.Join(prefix, "bin"), "/usr/local/bin", "/usr/bin", "/bin"}, ":")
	// The session reads the token, says it is ready, waits for the host's
	// files written meanwhile, reads them. No timing: each side waits for
	// the other's file.
	script := `cat "$P/etc/npmrc" 2>/dev/null || echo "no npmrc"
test -x "$P/bin/node" && test -f "$P/lib/node_modules/npm/package.json" && echo "node there"
touch ready
while [ ! -e go ]; do sleep 0.05; done
cat "$P/etc/yarnrc" "$P/pip.conf" 2>/dev/null || echo "no later files"
`
	// An agent as npm -g installs it: a script whose #! names node (here
	// a copy of sh, which runs it as the script it also is).
	agent := filepath.Join(prefix, "lib/node_modules/rig-agent/cli.js")
	writeFile(t, agent, "#!/usr/bin/env node\n"+script)
	os.Chmod(agent, 0o755)
	for _, c := range []struct {
		name, bin string
		args      []string
		command   []string
		leaks     bool
	}{
		{"weakened", weakenedMosaic(t), nil, nil, true},
		{"service", mosaicBin, nil, nil, false},
		{"scope", mosaicBin, []string{"--scope", "--direct"}, nil, false},
		{"landlock", mosaicBin, []string{"--sandbox", "landlock"}, nil, false},
		{"agent of that node", mosaicBin, nil, []string{agent}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.RemoveAll(filepath.Join(prefix, "etc"))
			os.Remove(filepath.Join(prefix, "pip.conf"))
			writeFile(t, filepath.Join(prefix, "etc/npmrc"), "//registry.npmjs.org/:_authToken=npm_TOKEN_AT_START\n")
			ws := workspace(t)
			args := append([]string{"run", "--direct", "-w", ws}, c.args...)
			command := c.command
			if command == nil {
				command = []string{"sh", "-c", script}
			}
			args = append(append(args, "--env", "P="+prefix, "--"), command...)
			cmd := exec.Command(c.bin, args...)
			cmd.Env = append(os.Environ(), "PATH="+path)
			done := make(chan result, 1)
			go func() { done <- runResult(t, cmd) }()
			deadline := time.Now().Add(60 * time.Second)
			for {
				if _, err := os.Stat(filepath.Join(ws, "ready")); err == nil {
					break
				}
				select {
				case r := <-done:
					t.Fatalf("the session ended before it was ready: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatal("the session never said it was ready")
				}
				time.Sleep(50 * time.Millisecond)
			}
			writeFile(t, filepath.Join(prefix, "etc/yarnrc"), "npmAuthToken yarn_TOKEN_LATER\n")
			writeFile(t, filepath.Join(prefix, "pip.conf"), "[global]\nindex-url = https://u:pip_TOKEN_LATER@pypi.example/simple\n")
			writeFile(t, filepath.Join(ws, "go"), "")
			r := <-done
			if r.code != 0 || !strings.Contains(r.stdout, "node there") {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			for _, token := range []string{"npm_TOKEN_AT_START", "yarn_TOKEN_LATER", "pip_TOKEN_LATER"} {
				if leaked := strings.Contains(r.stdout, token); leaked != c.leaks {
					t.Errorf("%s read inside: %v, want %v\n%s", token, leaked, c.leaks, r.stdout)
				}
			}
		})
	}
}
