package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// BwrapEnv names the environment variable that picks the bwrap binary; tests
// point it at a missing or failing one.
const BwrapEnv = "MOSAIC_BWRAP"

// FindBwrap returns the absolute, resolved path of the bwrap binary to use:
// $MOSAIC_BWRAP when set, else bwrap on PATH.
func FindBwrap() (string, error) {
	name := os.Getenv(BwrapEnv)
	if name == "" {
		p, err := exec.LookPath("bwrap")
		if err != nil {
			return "", errors.New("bwrap is not installed (install the bubblewrap package, e.g. apt-get install bubblewrap)")
		}
		name = p
	}
	p, err := filepath.EvalSymlinks(name)
	if err != nil {
		return "", fmt.Errorf("bwrap at %s: %v (set %s to a working bwrap, or install bubblewrap)", name, err, BwrapEnv)
	}
	p, _ = filepath.Abs(p)
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("bwrap at %s is not an executable file (set %s to a working bwrap, or install bubblewrap)", p, BwrapEnv)
	}
	return p, nil
}

// Probe runs bwrap once with the namespaces and system binds a session uses,
// and returns bwrap's own reason when it cannot build them (no unprivileged
// user namespaces, an AppArmor userns restriction, a seccomp filter in a
// container). It runs /usr/bin/true, so it costs one bwrap start.
func Probe(ctx context.Context, bwrap string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	args := Argv(systemBinds(os.Lstat, os.Readlink), "/", []string{"/usr/bin/true"})
	cmd := exec.CommandContext(ctx, bwrap, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if err := cmd.Run(); err != nil {
		reason := strings.TrimSpace(stderr.String())
		if reason == "" {
			reason = err.Error()
		}
		return fmt.Errorf("%s cannot build the sandbox: %s", bwrap, firstLine(reason))
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
