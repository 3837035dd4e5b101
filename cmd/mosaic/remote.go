package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"mosaic/credentials"
	"mosaic/internal/errcode"
	"mosaic/internal/termsafe"
	"mosaic/internal/xdg"
	"mosaic/manager"
	"mosaic/manager/remote"
	"mosaic/sandbox/egress"
	"mosaic/units"
)

// hostBound is how long a --host may take to answer ssh's connection, and,
// in thirds, how long a silent one is borne (ServerAliveInterval × 3).
const hostBound = 10

// hostCall is one command line bound for other machines: the targets, and
// mosaic's arguments without the --host flags.
type hostCall struct {
	targets []remote.Target
	args    []string // after mosaic's name, --host flags taken out
	bound   time.Duration
}

// hostArgs takes the --host (-H) flags from the front of args (and, for
// list, from anywhere before --), or MOSAIC_HOST when there is none, and
// `list --all-hosts` reads ~/.config/mosaic/hosts. It returns no targets
// for a local command.
func hostArgs(args []string, env func(string) string) (hostCall, error) {
	call := hostCall{bound: hostBound * time.Second}
	if v := env("MOSAIC_HOST_TIMEOUT"); v != "" {
		d, err := units.ParseDuration("MOSAIC_HOST_TIMEOUT", v)
		if err != nil || d < time.Second {
			return call, errcode.BadHost.New("MOSAIC_HOST_TIMEOUT=%q is not a duration of a second or more (e.g. 10s)", v)
		}
		call.bound = d
	}
	f, err := takeHostFlags(args)
	if err != nil {
		return call, err
	}
	if f.allHosts {
		listed, err := readHostsFile(xdg.ConfigHome(env("HOME"), env))
		if err != nil {
			return call, err
		}
		f.names = append(f.names, listed...)
	}
	if len(f.names) == 0 && env("MOSAIC_HOST") != "" {
		f.names = []string{env("MOSAIC_HOST")}
	}
	if call.targets, err = targetsOf(f.names); err != nil {
		return call, err
	}
	call.args = f.rest
	if len(call.targets) > 1 && !f.isList {
		return call, errcode.BadHost.New("only `mosaic list` takes several --host; give one, or run the command once per host")
	}
	if len(call.targets) == 1 && call.targets[0] == (remote.Target{}) && !f.isList {
		call.targets = nil // --host local: this machine
	}
	if len(call.targets) > 0 {
		return call, hostLends(f.rest)
	}
	return call, nil
}

// hostFlags is a command line with its --host flags taken out: the names
// they gave, the rest, whether the command is list and it asked for
// --all-hosts.
type hostFlags struct {
	names, rest      []string
	isList, allHosts bool
}

// takeHostFlags takes the --host (-H) flags from the front of args and,
// for list, from anywhere before -- (with --all-hosts).
func takeHostFlags(args []string) (hostFlags, error) {
	var f hostFlags
	take := func(i int) (int, bool, error) {
		a := args[i]
		switch {
		case a == "--host" || a == "-H" || a == "-host":
			if i+1 >= len(args) {
				return i, false, errcode.BadHost.New("%s needs a value: [USER@]HOST[:PORT]", a)
			}
			f.names = append(f.names, args[i+1])
			return i + 1, true, nil
		case strings.HasPrefix(a, "--host=") || strings.HasPrefix(a, "-H="):
			_, v, _ := strings.Cut(a, "=")
			f.names = append(f.names, v)
			return i, true, nil
		}
		return i, false, nil
	}
	i := 0
	for ; i < len(args); i++ {
		j, ok, err := take(i)
		if err != nil {
			return f, err
		}
		if !ok {
			break
		}
		i = j
	}
	f.isList = i < len(args) && args[i] == "list"
	for ; i < len(args); i++ {
		if f.isList && args[i] != "--" {
			j, ok, err := take(i)
			if err != nil {
				return f, err
			}
			if ok {
				i = j
				continue
			}
			if args[i] == "--all-hosts" {
				f.allHosts = true
				continue
			}
		}
		f.rest = append(f.rest, args[i])
		if args[i] == "--" {
			f.rest = append(f.rest, args[i+1:]...)
			break
		}
	}
	return f, nil
}

// targetsOf parses the hosts named ("local": this machine, the zero Target).
func targetsOf(names []string) ([]remote.Target, error) {
	var targets []remote.Target
	for _, n := range names {
		if n == "local" {
			targets = append(targets, remote.Target{})
			continue
		}
		t, err := remote.ParseTarget(n)
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
	}
	return targets, nil
}

// hostLends refuses --lend-ssh-key and --lend-ssh-sign with --host, and a
// --lend-git that does not read, before ssh runs. --lend-git travels as it
// is: the remote's mosaic asks the remote user's own git credential helper.
func hostLends(args []string) error {
	if flag := lendFlag(args); flag != "" {
		return errcode.BadSSHLend.New("%s is not available with --host: the remote's mosaic would lend the agent ssh forwarded to it (ssh -A), which the remote's root and its other processes can use too, and which is gone when this ssh ends; run mosaic on that host with an agent there", flag)
	}
	for _, v := range gitLendArgs(args) {
		if _, err := egress.ParseGitLend(v); err != nil {
			return errcode.BadGitLend.New("%w", err)
		}
	}
	return nil
}

// gitLendArgs are the values of the --lend-git flags among mosaic's own
// arguments (before --).
func gitLendArgs(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, v, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "lend-git" {
			continue
		}
		if !hasValue && i+1 < len(args) {
			i++
			v = args[i]
		}
		out = append(out, v)
	}
	return out
}

// lendFlag is the first --lend-ssh-key or --lend-ssh-sign among mosaic's
// own arguments (before --), or "".
func lendFlag(args []string) string {
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "lend-ssh-key" || name == "lend-ssh-sign") {
			return "--" + name
		}
	}
	return ""
}

// readHostsFile reads ~/.config/mosaic/hosts: one [USER@]HOST[:PORT] a line
// (or `local`), # comments.
func readHostsFile(config string) ([]string, error) {
	path := filepath.Join(config, "mosaic", "hosts")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errcode.BadHost.New("--all-hosts reads %s: %w (one [USER@]HOST[:PORT] a line, `local` for this machine)", path, err)
	}
	var hosts []string
	for _, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line != "" {
			hosts = append(hosts, line)
		}
	}
	if len(hosts) == 0 {
		return nil, errcode.BadHost.New("%s names no host", path)
	}
	return hosts, nil
}

// streaming are the commands whose stdout is not one JSON document (a
// session's own output, or the journal's lines), passed through as it is.
var streaming = map[string]bool{"run": true, "logs": true, "login": true, "attach": true}

// remoteMain runs a command line on other machines and returns the exit code.
func remoteMain(call hostCall, stdout, stderr io.Writer) int {
	out := &output{json: wantsJSON(call.args), stdout: stdout, stderr: stderr}
	if len(call.args) > 0 && call.args[0] == "list" && len(call.targets) > 1 {
		return listHosts(out, call)
	}
	t := call.targets[0]
	frame, err := frameFor(call.args, os.LookupEnv)
	if err != nil {
		return hostFailed(out, t, err)
	}
	cmd := ""
	if len(call.args) > 0 {
		cmd = call.args[0]
	}
	tty := isTerminal(os.Stdin) && isTerminal(os.Stdout) && (cmd == "run" || cmd == "login" || cmd == "attach")
	var doc *bytes.Buffer
	w := stdout
	switch {
	case out.json && !streaming[cmd]:
		doc = &bytes.Buffer{}
		w = doc
	case tty || onTerminal(stdout) && (cmd == "run" || cmd == "login" || cmd == "attach"):
		// The remote's terminal output (attach, run --pty, and a run's
		// output piped by ssh) reaches this terminal through the one
		// filter, as a local attach's does, whatever the remote's mosaic
		// did to it.
		w = termsafe.NewFilter(stdout)
	case onTerminal(stdout):
		// The remote's stdout is ssh's pipe, so it prints what a session
		// chose (its output in logs, its command in status) as it is:
		// escaped here, as a local mosaic escapes it on a terminal.
		esc := &escaping{w: stdout}
		defer esc.flush()
		w = esc
	}
	code, err := remote.Call{Target: t, Bound: call.bound, Version: thisVersion().String()}.Run(frame, tty, cmd == "run", w, stderr)
	if err != nil {
		return hostFailed(out, t, err)
	}
	if doc != nil {
		annotate(stdout, doc.Bytes(), t.String())
	}
	return code
}

// hostFailed reports an error of reaching t, naming it.
func hostFailed(out *output, t remote.Target, err error) int {
	e := errcode.Of(err)
	if out.json {
		_ = json.NewEncoder(out.stdout).Encode(map[string]any{"host": t.String(), "error": map[string]string{"code": e.Code, "message": e.Message}})
		return e.Exit
	}
	msg := oneLine(e.Message)
	if onTerminal(out.stderr) {
		msg = termsafe.Escape(msg, false)
	}
	fmt.Fprintf(out.stderr, "mosaic: %s\n", msg)
	return e.Exit
}

// annotate prints a remote's JSON document with the host named: an object
// gets "host", and so does every object of an array (list's sessions).
// Anything else is printed as it came.
func annotate(w io.Writer, doc []byte, host string) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		w.Write(doc)
		return
	}
	switch d := v.(type) {
	case map[string]any:
		d["host"] = host
	case []any:
		for _, e := range d {
			if m, ok := e.(map[string]any); ok {
				m["host"] = host
			}
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// frameFor is what a command line sends: its arguments, the caller's
// terminal variables and build settings, and for start and run the credentials, read here (from
// this environment and the --env-files, which are files of this machine) and
// taken off the command line: the remote gets them in its credential file only.
func frameFor(args []string, lookup func(string) (string, bool)) (remote.Frame, error) {
	f := remote.Frame{Args: args, Env: map[string]string{}}
	for _, kv := range callerEnv(os.Environ()) {
		n, v, _ := strings.Cut(kv, "=")
		f.Env[n] = v
	}
	// The build settings this shell exports travel as the credentials do:
	// the session gets them as a start here would, over the remote's own
	// (which give those this shell does not set); the remote's mosaic
	// drops and names one that looks like a credential.
	for n, v := range credentials.BuildEnvOf(lookup) {
		f.Env[n] = v
	}
	if len(args) == 0 || (args[0] != "start" && args[0] != "run") {
		return f, nil
	}
	kept, creq, i, err := credentialFlags(args, lookup)
	if err != nil {
		return f, err
	}
	command := args[i:]
	if len(command) > 0 && command[0] == "--" {
		command = command[1:]
	}
	home, _ := os.UserHomeDir()
	creq.ProfileDir, creq.Command, creq.LookupEnv = credentials.ProfileDir(home), command, lookup
	g, err := credentials.Resolve(creq)
	if errors.Is(err, errcode.UnknownProfile.Target()) {
		// The remote's own profile, unknown here: only what was named travels.
		creq.Profile = "generic"
		g, err = credentials.Resolve(creq)
	}
	if err != nil {
		return f, err
	}
	if len(g.Secrets) > 0 {
		f.Secrets = map[string]string{}
		for _, v := range g.Secrets {
			f.Secrets[v.Name] = v.Value
		}
	}
	// The profile's plain variables (a model, a base URL) come from this
	// environment too, as the credentials do.
	for _, name := range append(append([]string{}, g.Profile.PassEnv...), g.Profile.Endpoints...) {
		if _, secret := f.Secrets[name]; secret {
			continue
		}
		if v, ok := lookup(name); ok && credentials.ValidateValue(name, v, "") == nil {
			f.Env[name] = v
		}
	}
	f.Args = append(append([]string{args[0]}, kept...), args[i:]...)
	return f, nil
}

// credentialFlags takes the credential flags off start's or run's
// options in args (--credential, --env-file: read here; --pass-env: its
// value from lookup, as --env), into creq; kept is the rest of the
// options, and args[i:] the command.
func credentialFlags(args []string, lookup func(string) (string, bool)) (kept []string, creq credentials.Request, i int, err error) {
	cmd := findCommand(newApp(&output{}).Commands, args[0])
	i = 1
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasValue && takesValue(cmd, a) && i+1 < len(args) {
			i++
			value = args[i]
		}
		switch name {
		case "credential":
			creq.Credentials = append(creq.Credentials, value)
			continue
		case "env-file":
			creq.EnvFiles = append(creq.EnvFiles, value)
			continue
		case "pass-env":
			v, ok := lookup(value)
			if !ok {
				return nil, creq, i, errcode.BadEnv.New("--pass-env %s: %s is not set in your environment", value, value)
			}
			kept = append(kept, "--env", value+"="+v)
			continue
		case "profile":
			creq.Profile = value
		case "sign-in":
			creq.SignIn = !hasValue || value == "true"
		}
		kept = append(kept, a)
		if !strings.Contains(a, "=") && takesValue(cmd, a) {
			kept = append(kept, value)
		}
	}
	return kept, creq, i, nil
}

// escaping writes what passes line by line with every control character
// but the newline and tab escaped (termsafe), for a terminal.
type escaping struct {
	w       io.Writer
	partial []byte
}

func (e *escaping) Write(p []byte) (int, error) {
	e.partial = append(e.partial, p...)
	if i := bytes.LastIndexByte(e.partial, '\n'); i >= 0 {
		if _, err := io.WriteString(e.w, termsafe.Escape(string(e.partial[:i+1]), true)); err != nil {
			return 0, err
		}
		e.partial = append(e.partial[:0], e.partial[i+1:]...)
	}
	return len(p), nil
}

func (e *escaping) flush() {
	if len(e.partial) > 0 {
		_, _ = io.WriteString(e.w, termsafe.Escape(string(e.partial), true))
		e.partial = nil
	}
}

// remoteExec is the remote side of --host (`mosaic remote-exec 1 stdin` or
// `... hold PATH`): it takes the frame (remote.Receive), with the secrets
// in a file that dies with this process given as the command's --env-file
// (Frame.Argv), and runs the command line as if typed here.
func remoteExec(args []string) int {
	if !remote.SpeaksProtocol(args, 2, os.Stderr) {
		return errcode.ExitRefused
	}
	// The exit line ends every other way out, so that the caller tells
	// mosaic's failures from another program's (exitOf).
	code := remoteExecFrame(args[1:])
	if !isTerminal(os.Stderr) {
		remote.WriteExit(os.Stderr, code)
	}
	return code
}

// remoteExecFrame is remoteExec once the protocol is known to be this
// mosaic's: it takes the frame as mode says and runs its command line.
func remoteExecFrame(mode []string) int {
	f, err := remote.Receive(mode, os.Stdin)
	var argv []string
	done := func() {}
	if err == nil {
		argv, done, err = f.Argv()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mosaic: --host: %v\n", err)
		return errcode.ExitFailure
	}
	defer done()
	viaHost = true
	return runHere(argv, os.Stdout, os.Stderr)
}

// viaHost is set in the remote's mosaic of a --host command: the ssh agent
// it sees, if any, is one ssh forwarded to it, which a profile's
// LendSSHKey= or LendSSHSign= must not lend (requestFrom).
var viaHost bool

// remoteHold is `mosaic remote-hold 1`: keep a frame for one remote-exec.
func remoteHold(args []string) int { return remote.HoldMain(args, os.Stdin, os.Stdout, os.Stderr) }

// hostSessions is one host's answer to list.
type hostSessions struct {
	host     string
	sessions []map[string]any
	err      error
}

// listHosts lists the sessions of every target at once, each within the
// bound; a host that does not answer is named and the others still listed.
func listHosts(out *output, call hostCall) int {
	args := []string{"list", "--json"}
	for _, a := range call.args[1:] {
		if a == "--all" || a == "-a" || a == "--all=true" {
			args = append(args, "--all")
		}
	}
	answers := make([]hostSessions, len(call.targets))
	var wg sync.WaitGroup
	for i, t := range call.targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = listOne(t, args, call.bound)
		}()
	}
	wg.Wait()
	code := 0
	var all []map[string]any
	var failed []map[string]any
	for _, a := range answers {
		if a.err != nil {
			e := errcode.Of(a.err)
			code = errcode.ExitFailure
			failed = append(failed, map[string]any{"host": a.host, "error": map[string]string{"code": e.Code, "message": e.Message}})
			if !out.json {
				fmt.Fprintf(out.stderr, "mosaic: %s: %s\n", a.host, oneLine(e.Message))
			}
			continue
		}
		all = append(all, a.sessions...)
	}
	if out.json {
		if all == nil {
			all = []map[string]any{}
		}
		doc := map[string]any{"sessions": all}
		if failed != nil {
			doc["unreachable"] = failed
		}
		enc := json.NewEncoder(out.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(doc)
		return code
	}
	full := false
	for _, a := range call.args {
		full = full || a == "--full" || a == "-l"
	}
	printHostList(out, all, full)
	return code
}

// listOne asks one host (the zero Target: this machine) for its sessions.
func listOne(t remote.Target, args []string, bound time.Duration) hostSessions {
	name := t.String()
	var doc bytes.Buffer
	var err error
	code := 0
	if t == (remote.Target{}) {
		name = "local"
		code = runHere(append([]string{"mosaic"}, args...), &doc, io.Discard)
	} else {
		var diag bytes.Buffer
		code, err = remote.Call{Target: t, Bound: bound, Whole: true, Version: thisVersion().String()}.Run(remote.Frame{Args: args}, false, false, &doc, &diag)
	}
	if err == nil && code != 0 {
		var e struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal(doc.Bytes(), &e) == nil && e.Error.Message != "" {
			err = errors.New(e.Error.Message)
		} else {
			err = fmt.Errorf("list exited %d", code)
		}
	}
	var list []map[string]any
	if err == nil {
		if jerr := json.Unmarshal(doc.Bytes(), &list); jerr != nil {
			err = fmt.Errorf("its list is not mosaic's (%w)", jerr)
		}
	}
	for _, s := range list {
		s["host"] = name
	}
	return hostSessions{host: name, sessions: list, err: err}
}

// printHostList prints sessions of several hosts as one table, HOST first.
func printHostList(out *output, all []map[string]any, full bool) {
	if len(all) == 0 {
		fmt.Fprintln(out.stdout, "no sessions on these hosts")
		return
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\t"+listHeader)
	for _, m := range all {
		raw, _ := json.Marshal(m)
		var s manager.Session
		_ = json.Unmarshal(raw, &s)
		host, _ := m["host"].(string)
		fmt.Fprintln(tw, host+"\t"+listRow(s))
	}
	tw.Flush()
	io.WriteString(out.stdout, cutLines(b.String(), fitWidth(out, full)))
}
