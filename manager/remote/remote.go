// Package remote reaches another machine's mosaic over the user's own ssh, as
// `systemctl -H` and `docker -H ssh://` do: the remote's own mosaic acts on
// the remote's own systemd user manager, and nothing new listens anywhere.
//
// What travels, and how: the remote command ssh runs is fixed (a short
// POSIX sh script that finds mosaic and execs `mosaic remote-exec 1`); the
// mosaic command line, the caller's non-secret terminal variables and build
// settings (credentials.BuildSettings, set in the remote mosaic's own
// environment) and every credential travel inside one length-prefixed frame
// on ssh's stdin, never on a command line (neither ssh's nor the remote's);
// a credential never in the remote's environment either. With a terminal (`ssh -t`, whose stdin is the user's
// keyboard), a first ssh connection without a terminal hands the frame to
// `mosaic remote-hold 1`, which keeps it in memory behind a socket of the
// user's in $XDG_RUNTIME_DIR and gives it to the one remote-exec that asks.
package remote

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"mosaic/credentials"
	"mosaic/internal/credvar"
	"mosaic/internal/errcode"
)

// Protocol is the version of the frame and of the remote-exec/remote-hold
// stages. A remote whose mosaic speaks another refuses with ErrVersion's
// line, which the caller turns into "install the same mosaic there".
//
// 2: remote-hold's answer is HeldMarker and the path, and remote-exec ends
// with its exit line whatever stopped it, so that a program of mosaic's name
// that is another is told from mosaic (issue 40).
const Protocol = "2"

// ExecStage and HoldStage are the hidden first arguments of the remote side.
const (
	ExecStage = "remote-exec"
	HoldStage = "remote-hold"
)

// Markers the remote side prints on stderr so that the caller can tell its
// failures from the command's own: the remote has no mosaic, or another
// protocol.
const (
	MissingMarker = "mosaic-remote: no mosaic on this host"
	VersionMarker = "mosaic-remote: protocol"
	// HeldMarker starts remote-hold's one line on stdout, before the path
	// of the held frame's socket: what answers without it is not mosaic.
	HeldMarker = "mosaic-remote: held "
)

// nameChars are what a user or host name (an ssh alias included) may hold.
const nameChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_"

// maxFrame bounds what a remote reads before anything else: the command line
// and the credentials, far under a MiB in any real use.
const maxFrame = 4 << 20

// Target is where a command goes: [USER@]HOST[:PORT], as ssh takes it (an
// alias of ~/.ssh/config included).
type Target struct {
	User, Host string
	Port       int // 0: ssh's own (its config, else 22)
}

// String is the target as the user wrote it, which is also how output names it.
func (t Target) String() string {
	s := t.Host
	if t.User != "" {
		s = t.User + "@" + s
	}
	if t.Port != 0 {
		s += ":" + strconv.Itoa(t.Port)
	}
	return s
}

// ParseTarget reads [USER@]HOST[:PORT]. A host or user that ssh could take
// for an option (a leading '-'), or with a space or control character, is
// refused: it is a command line of ssh's in the making.
func ParseTarget(s string) (Target, error) {
	bad := func(why string) (Target, error) {
		return Target{}, errcode.BadHost.New("--host %q %s: give [USER@]HOST[:PORT], e.g. --host dev@build-box", s, why)
	}
	if s == "" {
		return bad("is empty")
	}
	var t Target
	rest := s
	if u, h, ok := strings.Cut(rest, "@"); ok {
		t.User, rest = u, h
		if u == "" {
			return bad("has an empty user")
		}
	}
	if strings.HasPrefix(rest, "[") { // [::1]:2222
		end := strings.Index(rest, "]")
		if end < 0 {
			return bad("has an unclosed [")
		}
		t.Host, rest = rest[1:end], rest[end+1:]
		if rest != "" && !strings.HasPrefix(rest, ":") {
			return bad("has text after ]")
		}
		rest = strings.TrimPrefix(rest, ":")
		if rest != "" {
			p, err := strconv.Atoi(rest)
			if err != nil || p < 1 || p > 65535 {
				return bad("has a port that is not 1-65535")
			}
			t.Port = p
		}
	} else if h, p, ok := strings.Cut(rest, ":"); ok && !strings.Contains(p, ":") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return bad("has a port that is not 1-65535")
		}
		t.Host, t.Port = h, n
	} else {
		t.Host = rest
	}
	if t.Host == "" {
		return bad("has no host")
	}
	if strings.HasPrefix(t.User, "-") || strings.HasPrefix(t.Host, "-") {
		return bad("starts with '-', which ssh would read as an option")
	}
	if !only(t.User, nameChars) || !only(t.Host, nameChars+":%") {
		return bad("holds a character a user or host name cannot")
	}
	return t, nil
}

// SSHArgs is ssh's argument list (after the program's name) for running the
// remote stage: no command of the caller's is in it. tty asks for a terminal
// (-t); bound is how long a connection may take to come up and how long a
// silent peer is borne, in seconds.
func SSHArgs(t Target, tty bool, stage string, bound int, extra ...string) []string {
	// LogLevel=ERROR: ssh's own notes (with -t, "Connection to HOST
	// closed." at the end; "Warning: Permanently added ...") are not the
	// command's output, while its errors (a refused key, a host it cannot
	// resolve) still say why a host was not reached.
	args := []string{"-o", "LogLevel=ERROR", "-o", "ConnectTimeout=" + strconv.Itoa(bound),
		"-o", "ServerAliveInterval=" + strconv.Itoa(max(1, bound/3)), "-o", "ServerAliveCountMax=3"}
	if tty {
		args = append(args, "-t")
	} else {
		args = append(args, "-T")
	}
	if t.Port != 0 {
		args = append(args, "-p", strconv.Itoa(t.Port))
	}
	if t.User != "" {
		args = append(args, "-l", t.User)
	}
	return append(args, "--", t.Host, RemoteCommand(stage, extra...))
}

// RemoteCommand is the one line ssh hands the remote's login shell: a POSIX
// sh script, in single quotes, that finds mosaic where a non-interactive ssh
// login may not have it on PATH (~/.local/bin, /usr/local/bin) and execs it
// with the stage and its fixed arguments (only mosaic's own words: never the
// caller's command line).
func RemoteCommand(stage string, extra ...string) string {
	script := `for m in mosaic "$HOME/.local/bin/mosaic" /usr/local/bin/mosaic; do ` +
		`if command -v "$m" >/dev/null 2>&1; then exec "$m" "$@"; fi; done; ` +
		`echo "` + MissingMarker + ` (looked on PATH, in ~/.local/bin and /usr/local/bin)" >&2; exit 127`
	words := append([]string{"sh", "-c", script, "mosaic-remote", stage, Protocol}, extra...)
	for i, w := range words {
		words[i] = shellQuote(w)
	}
	return strings.Join(words, " ")
}

// only reports whether every byte of s is one of chars.
func only(s, chars string) bool {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(chars, s[i]) < 0 {
			return false
		}
	}
	return true
}

// shellQuote quotes a word for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && only(s, nameChars+"/=") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Frame is what the remote side reads before anything else.
type Frame struct {
	Args    []string          `json:"args"`              // mosaic's arguments after its name
	Env     map[string]string `json:"env,omitempty"`     // non-secret: TERM, LANG, ..., the build settings
	Secrets map[string]string `json:"secrets,omitempty"` // credentials, for the remote's credential file only
}

// String never shows a secret's value.
func (f Frame) String() string {
	names := make([]string, 0, len(f.Secrets))
	for n := range f.Secrets {
		names = append(names, n)
	}
	return fmt.Sprintf("frame{args: %q, secrets: %v}", f.Args, names)
}

// WriteFrame writes f as "mosaic-frame 1 LENGTH\n" and LENGTH bytes of JSON.
func WriteFrame(w io.Writer, f Frame) error {
	for n, v := range f.Secrets {
		if err := credvar.ValidateName(n); err != nil {
			return err
		}
		if err := credentials.ValidateValue(n, v, "to send to the remote"); err != nil {
			return err
		}
	}
	body, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if len(body) > maxFrame {
		return errcode.TooManyArguments.New("the command line and credentials come to %d bytes, more than the %d a remote takes", len(body), maxFrame)
	}
	_, err = fmt.Fprintf(w, "mosaic-frame %s %d\n%s", Protocol, len(body), body)
	return err
}

// ReadFrame reads one frame, byte by byte up to its header's newline and
// then exactly its length, so that what follows (the command's own stdin)
// stays unread.
func ReadFrame(r io.Reader) (Frame, error) {
	var head []byte
	one := make([]byte, 1)
	for len(head) < 64 {
		n, err := r.Read(one)
		if n == 1 {
			if one[0] == '\n' {
				break
			}
			head = append(head, one[0])
			continue
		}
		if err != nil {
			return Frame{}, fmt.Errorf("reading the frame's header: %w", err)
		}
	}
	fields := strings.Fields(string(head))
	if len(fields) != 3 || fields[0] != "mosaic-frame" {
		return Frame{}, fmt.Errorf("not a mosaic frame (%q)", head)
	}
	if fields[1] != Protocol {
		return Frame{}, fmt.Errorf("%s %s, this mosaic speaks %s", VersionMarker, fields[1], Protocol)
	}
	n, err := strconv.Atoi(fields[2])
	if err != nil || n < 0 || n > maxFrame {
		return Frame{}, fmt.Errorf("a frame of %q bytes", fields[2])
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return Frame{}, fmt.Errorf("reading the frame: %w", err)
	}
	var f Frame
	if err := json.Unmarshal(body, &f); err != nil {
		return Frame{}, fmt.Errorf("reading the frame: %w", err)
	}
	return f, nil
}
