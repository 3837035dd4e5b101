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

	"mosaic/internal/regfile"
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
		return "", fmt.Errorf("bwrap at %s: %w (set %s to a working bwrap, or install bubblewrap)", name, err, BwrapEnv)
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

// ProbeCached is Probe, remembered in cacheDir (the user's runtime
// directory, emptied at logout and reboot) for as long as bwrap and the
// kernel settings that decide whether it works stay the same. A stale "works"
// cannot fail open: a session whose bwrap fails never runs its command.
func ProbeCached(ctx context.Context, bwrap, cacheDir string) error {
	key := probeKey(bwrap)
	path := filepath.Join(cacheDir, "probe-ok")
	if b, err := regfile.Read(path, true, 64<<10); err == nil && string(b) == key {
		return nil
	}
	if err := Probe(ctx, bwrap); err != nil {
		os.Remove(path)
		return err
	}
	// A temporary file of its own: concurrent starts write it too.
	if os.MkdirAll(cacheDir, 0o700) == nil {
		if f, err := os.CreateTemp(cacheDir, ".probe-ok.*"); err == nil {
			_, werr := f.WriteString(key)
			if f.Close() != nil || werr != nil || os.Rename(f.Name(), path) != nil {
				os.Remove(f.Name())
			}
		}
	}
	return nil
}

// probeKey names what the probe's answer depends on: the bwrap binary, the
// boot, and the sysctls that allow or forbid unprivileged user namespaces.
func probeKey(bwrap string) string {
	var b strings.Builder
	if fi, err := os.Stat(bwrap); err == nil {
		fmt.Fprintf(&b, "%s %d %d\n", bwrap, fi.Size(), fi.ModTime().UnixNano())
	}
	for _, f := range []string{
		"/proc/sys/kernel/random/boot_id",
		"/proc/sys/user/max_user_namespaces",
		"/proc/sys/kernel/unprivileged_userns_clone",
		"/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
	} {
		v, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "%s=%s\n", filepath.Base(f), strings.TrimSpace(string(v)))
	}
	return b.String()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
