package sandbox

import (
	"fmt"
	"path/filepath"
	"strings"
)

// InitEnv is the environment the exec shim gives bwrap, and so the init's
// (PID 1's) initial environment block: the init's own two variables
// (PromiseEnv, NotifyFDEnv) and the variables the init may pass on to the
// command (its allowlist and the --pass and --credential names on its
// command line, read from bwrapArgv), nothing else. The unit's environment
// holds everything imported into the user manager (SSH_AUTH_SOCK,
// DBUS_SESSION_BUS_ADDRESS, DISPLAY, tokens set with `systemctl --user
// set-environment`); none of that may exist anywhere inside the sandbox,
// not even in memory the command cannot read. A service's shim and a
// scope's (manager.RunScope) both come through here.
func InitEnv(environ, bwrapArgv []string) ([]string, error) {
	pass, err := initNames(bwrapArgv)
	if err != nil {
		return nil, err
	}
	allowed := allowedNames(pass)
	// The init's own: the promise, systemd's notification descriptor, and
	// the tests' Landlock fault (never passed on to the command).
	allowed[PromiseEnv], allowed[NotifyFDEnv], allowed[LandlockFaultEnv] = true, true, true
	var env []string
	for _, kv := range environ {
		if name, _, ok := strings.Cut(kv, "="); ok && (allowed[name] || hasAnyPrefix(name, passEnvPrefixes)) {
			env = append(env, kv)
		}
	}
	return env, nil
}

// initNames finds the init's command line in bwrap's (after bwrap's "--",
// InitPath then "init") and returns the names it is told to pass on.
func initNames(bwrapArgv []string) ([]string, error) {
	if len(bwrapArgv) > 1 && bwrapArgv[1] == "init" {
		// --sandbox landlock: no bwrap, the shim becomes mosaic's init.
		return namesIn(bwrapArgv[2:]), nil
	}
	for i := 0; i+2 < len(bwrapArgv); i++ {
		if initAt(bwrapArgv, i) {
			return namesIn(bwrapArgv[i+3:]), nil
		}
	}
	return nil, fmt.Errorf("bwrap's command line does not run mosaic's init (%s init)", InitPath)
}

// namesIn are the names an init command line (after "init") passes on.
func namesIn(args []string) []string {
	var names []string
	for j := 0; j < len(args) && args[j] != "--"; j++ {
		if (args[j] == "--pass" || args[j] == "--credential") && j+1 < len(args) {
			names = append(names, args[j+1])
			j++
		}
	}
	return names
}

// allowedNames are the variables the init passes to the command: its
// allowlist and pass. Variables matching passEnvPrefixes pass too.
func allowedNames(pass []string) map[string]bool {
	allowed := make(map[string]bool, len(passEnv)+len(pass)+2)
	for _, n := range passEnv {
		allowed[n] = true
	}
	for _, n := range pass {
		allowed[n] = true
	}
	return allowed
}

// passEnv are the variables the init passes from the unit's environment to the
// command; everything else the user manager holds (desktop sessions import
// SSH_AUTH_SOCK, DBUS_SESSION_BUS_ADDRESS, DISPLAY and tokens into it) is
// dropped. Variables matching passEnvPrefixes pass too.
var passEnv = []string{"PATH", "LANG", "LANGUAGE", "TERM", "COLORTERM", "NO_COLOR", "TZ", "USER", "LOGNAME"}

var passEnvPrefixes = []string{"LC_"}

// CommandEnv is the command's environment: the allow-listed variables and the
// ones named with --pass from environ, then HOME, TMPDIR and MOSAIC_SESSION.
func CommandEnv(environ []string, session, home string, pass []string) []string {
	allowed := allowedNames(pass)
	var env []string
	hasPath := false
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || !(allowed[name] || hasAnyPrefix(name, passEnvPrefixes)) {
			continue
		}
		hasPath = hasPath || name == "PATH"
		env = append(env, kv)
	}
	if !hasPath {
		env = append(env, "PATH="+DefaultPath)
	}
	if allowed[BusEnv] { // --may-launch: mosaic is on the PATH
		for i, kv := range env {
			if strings.HasPrefix(kv, "PATH=") {
				env[i] = kv + ":" + filepath.Dir(BinInside)
			}
		}
	}
	return append(env, "HOME="+home, "TMPDIR=/tmp", "MOSAIC_SESSION="+session)
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
