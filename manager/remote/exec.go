package remote

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"mosaic/internal/credvar"
	"mosaic/internal/errcode"
)

// The remote's end of the transport: what `mosaic remote-exec` and
// `mosaic remote-hold` do before and after the command line they carry,
// which the CLI runs as if typed there.

// SpeaksProtocol reports whether a remote stage's arguments (after its
// name) begin with this mosaic's Protocol and hold at least n of them;
// when not, it says so on stderr in the line the caller reads
// (VersionMarker) and the stage exits errcode.ExitRefused.
func SpeaksProtocol(args []string, n int, stderr io.Writer) bool {
	if len(args) >= n && len(args) > 0 && args[0] == Protocol {
		return true
	}
	fmt.Fprintf(stderr, "%s %s, this mosaic speaks %s\n", VersionMarker, strings.Join(args[:min(1, len(args))], ""), Protocol)
	return false
}

// WriteExit ends a remote stage's stderr with its exit line (ExitMarker),
// so that the caller tells mosaic's failures from another program's.
func WriteExit(stderr io.Writer, code int) {
	fmt.Fprintf(stderr, "%s%d\n", ExitMarker, code)
}

// Receive is remote-exec's frame, read as mode says: "stdin" (ssh's stdin),
// or "hold PATH" (the frame remote-hold keeps behind PATH's socket). A
// dropped connection ends this process as a hang-up ends a terminal's
// command (`run` stops its session, `logs -f` returns), and a non-login
// ssh that set no XDG_RUNTIME_DIR gets the user's.
func Receive(mode []string, stdin io.Reader) (Frame, error) {
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGHUP), 0, 0, 0)
	if os.Getenv("XDG_RUNTIME_DIR") == "" { // a non-login ssh may not set it
		if rt := fmt.Sprintf("/run/user/%d", os.Getuid()); isDir(rt) {
			os.Setenv("XDG_RUNTIME_DIR", rt)
		}
	}
	switch {
	case mode[0] == "stdin":
		return ReadFrame(stdin)
	case mode[0] == "hold" && len(mode) == 2:
		return Fetch(HoldDir(os.Getenv("XDG_RUNTIME_DIR")), mode[1])
	}
	return Frame{}, fmt.Errorf("unknown mode %q", mode[0])
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// Argv sets the frame's plain variables that may be set here (Passable)
// and returns the command line to run ("mosaic" first): the frame's, with
// its secrets in a file that dies with this process given as the
// command's --env-file. done closes that file.
func (f Frame) Argv() (argv []string, done func(), err error) {
	for n, v := range f.Env {
		if Passable(n) {
			os.Setenv(n, v)
		}
	}
	argv = append([]string{"mosaic"}, f.Args...)
	if len(f.Secrets) == 0 {
		return argv, func() {}, nil
	}
	path, done, err := secretsFile(f.Secrets)
	if err != nil {
		return nil, nil, err
	}
	return append([]string{"mosaic", f.Args[0], "--env-file", path}, f.Args[1:]...), done, nil
}

// Passable reports whether a plain variable from the caller's side may be
// set here: the terminal's and the profiles' (a model, a base URL), never
// one that steers this process or what it starts (PATH, LD_*, HOME, the
// runtime and bus addresses, mosaic's own).
func Passable(name string) bool {
	if credvar.ValidateName(name) != nil {
		return false
	}
	switch name {
	case "PATH", "HOME", "USER", "LOGNAME", "SHELL", "IFS", "ENV", "BASH_ENV", "TMPDIR", "GOCOVERDIR":
		return false
	}
	for _, p := range []string{"LD_", "XDG_", "DBUS_", "MOSAIC_", "SSH_", "SYSTEMD_", "GODEBUG", "GOTRACEBACK"} {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	return true
}

// secretsFile writes the secrets to a memfd of mode 0600 (no disk, and
// gone however this process ends) and returns its /proc path, which
// ReadEnvFile reads as a file of the user's.
func secretsFile(secrets map[string]string) (string, func(), error) {
	fd, err := unix.MemfdCreate("mosaic-remote-credentials", unix.MFD_CLOEXEC)
	if err != nil {
		return "", nil, fmt.Errorf("a memory file for the credentials: %w", err)
	}
	f := os.NewFile(uintptr(fd), "mosaic-remote-credentials")
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return "", nil, err
	}
	var b strings.Builder
	for n, v := range secrets {
		// ReadEnvFile takes one pair of quotes off and nothing else; the
		// values were checked to hold no control character.
		fmt.Fprintf(&b, "%s=\"%s\"\n", n, v)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return "", nil, err
	}
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), fd), func() { f.Close() }, nil
}

// HoldMain is `mosaic remote-hold 1` (args after the stage's name): keep
// the frame on stdin for one remote-exec (Hold), in the user's runtime
// directory. It returns the stage's exit code.
func HoldMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if !SpeaksProtocol(args, 1, stderr) {
		return errcode.ExitRefused
	}
	rt := os.Getenv("XDG_RUNTIME_DIR")
	if rt == "" {
		rt = fmt.Sprintf("/run/user/%d", os.Getuid())
	}
	if err := Hold(stdin, stdout, HoldDir(rt)); err != nil {
		fmt.Fprintf(stderr, "mosaic: --host: %v\n", err)
		WriteExit(stderr, errcode.ExitFailure)
		return errcode.ExitFailure
	}
	return 0
}
