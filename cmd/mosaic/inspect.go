package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"mosaic/internal/errcode"

	"github.com/urfave/cli/v2"

	"mosaic/credentials"
	"mosaic/manager"
	"mosaic/manager/request"
	"mosaic/sandbox"
	"mosaic/sandbox/egress"
	"mosaic/units"
)

func listCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the sessions systemd has; with --all also the ended ones kept until `mosaic rm` or `mosaic gc`",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "also list ended sessions"}, fullFlag, jsonFlag,
			// Both taken off by run before the library sees them.
			&cli.StringSliceFlag{Name: "host", Aliases: []string{"H"}, Usage: "list the sessions of `[USER@]HOST[:PORT]` (repeatable; `local` is this machine), with a HOST column"},
			&cli.BoolFlag{Name: "all-hosts", Usage: "list the sessions of every host in ~/.config/mosaic/hosts"}},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			return out.connected(func(ctx context.Context, m *manager.Manager) error {
				list, err := m.List(ctx)
				if c.Bool("all") {
					list, err = m.ListAll(ctx)
				}
				if err != nil {
					return err
				}
				knowChanges(ctx, m, out, list)
				if list == nil {
					list = []manager.Session{}
				}
				out.result(list, func(w io.Writer) {
					var b strings.Builder
					printList(&b, list, c.Bool("all"))
					io.WriteString(w, cutLines(b.String(), fitWidth(out, c.Bool("full"))))
				})
				return nil
			})
		},
	}
}

// knowChanges reads the change of each clone-mode session in list that
// ended since it was last read (its finish step, some tenths of a second
// each), with progress on a terminal; one that cannot be read is said in a
// line and shown as it was.
func knowChanges(ctx context.Context, m *manager.Manager, out *output, list []manager.Session) {
	var prog *progress
	for i := range list {
		if !list[i].ChangeUnknown() {
			continue
		}
		if prog == nil {
			prog = newProgress(out.stderr, !out.json && isTerminal(os.Stderr), "mosaic")
			defer prog.done()
		}
		prog.set("reading the change of " + list[i].Name)
		if err := m.KnowChange(ctx, &list[i]); err != nil {
			fmt.Fprintf(out.stderr, "mosaic: cannot read the change of %s: %v\n", list[i].Name, err)
		}
	}
}

// printList prints sessions as a table.
func printList(w io.Writer, list []manager.Session, all bool) {
	if len(list) == 0 {
		if all {
			fmt.Fprintln(w, "no sessions: start one with `mosaic run -- COMMAND` or `mosaic start -- COMMAND`")
		} else {
			fmt.Fprintln(w, "no sessions running (`mosaic list --all` also shows ended ones)")
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	clones := false // the CHANGE column, only where a clone-mode session is listed
	for _, s := range list {
		clones = clones || s.Clone != nil
	}
	if clones {
		fmt.Fprintln(tw, listHeader+"\tCHANGE")
	} else {
		fmt.Fprintln(tw, listHeader)
	}
	for _, s := range list {
		if !clones {
			fmt.Fprintln(tw, listRow(s))
			continue
		}
		change := "direct"
		if s.Clone != nil {
			change = "clone: " + s.Clone.Line()
		}
		fmt.Fprintln(tw, listRow(s)+"\t"+change)
	}
	tw.Flush()
}

// statusView is what status shows: the session, and its egress proxy's
// live view while it runs.
type statusView struct {
	manager.Session
	Egress *egress.State `json:"egress,omitempty"`
	// WorkspaceMode is "clone" or "direct" (a session with a workspace);
	// Warning says, in direct mode, what that means.
	WorkspaceMode string `json:"workspace_mode,omitempty"`
	Warning       string `json:"warning,omitempty"`
}

// listHeader and listRow are list's table, also with a HOST column before
// them (mosaic list --host A --host B).
const listHeader = "NAME\tKIND\tSTATE\tSUB\tPID\tAGE\tMEMORY\tENDED"

func listRow(s manager.Session) string {
	ended := "-"
	if !s.Running() && s.How() != "" {
		ended = s.How()
	}
	if s.Problem != "" {
		ended = "damaged: see mosaic status " + s.Name
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", s.Name, s.Kind, s.State, s.SubState, pid(s.MainPID), age(s.Since), humanBytes(s.MemoryBytes), ended)
}

func statusCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:         "status",
		Usage:        "show one session: state, result, processes, resources, workspace and the sandbox's binds",
		ArgsUsage:    "NAME",
		Flags:        []cli.Flag{jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			name, err := oneName(c)
			if err != nil {
				return err
			}
			return out.connected(func(ctx context.Context, m *manager.Manager) error {
				if err := m.Settle(ctx, name); err != nil {
					return err
				}
				s, err := m.Status(ctx, name)
				if err != nil {
					return err
				}
				knowChanges(ctx, m, out, []manager.Session{s})
				if s2, err := m.Status(ctx, name); err == nil {
					s = s2
				}
				// The egress proxy's live view (grants, refusals) comes from
				// the proxy itself, never from the journal, where a session
				// could print a line that looks like one.
				v := statusView{Session: s, Egress: egressState(ctx, m, s)}
				switch {
				case s.Clone != nil:
					v.WorkspaceMode = request.ModeClone
				case s.Workspace != "":
					v.WorkspaceMode, v.Warning = request.ModeDirect, request.DirectWarning
				}
				out.result(v, func(w io.Writer) {
					var b strings.Builder
					printStatus(&b, s, out.safe)
					if v.Egress != nil {
						printEgress(&b, s.Name, v.Egress, out.safe)
					} else if s.Network == "allow" && s.Running() {
						fmt.Fprintf(&b, "egress:    its proxy does not answer on its control socket: `systemctl --user status %s` says why\n", units.EgressUnitName(s.Name))
					} else if s.EgressRecord != nil {
						printEgressRecord(&b, s.Name, s.EgressRecord, out.safe)
					}
					io.WriteString(w, wrapLines(b.String(), fitWidth(out, false)))
				})
				warnDropped(s)
				return nil
			})
		},
	}
}

// printStatus prints one session; safe escapes what the session chose.
func printStatus(w io.Writer, s manager.Session, safe func(string) string) {
	printState(w, s)
	if len(s.Command) > 0 {
		fmt.Fprintf(w, "command:   %s\n", safe(shellQuote(s.Command)))
	}
	if s.MainPID != 0 || len(s.PIDs) > 0 {
		fmt.Fprintf(w, "pids:      main %s, all %v\n", pid(s.MainPID), s.PIDs)
	}
	fmt.Fprintf(w, "resources: memory %s, tasks %s, cpu %s\n", humanBytes(s.MemoryBytes), count(s.Tasks), cpu(s.CPUNSec))
	fmt.Fprintf(w, "limits:    memory %s, tasks %s, cpu %s (flags, profile, mosaic.conf or mosaic's defaults; `mosaic doctor` says whether they are enforced)\n",
		orNone(humanBytes(s.MemoryMax)), orNone(count(s.TasksMax)), orNone(percent(s.CPUQuota)))
	printStorage(w, s, safe)
	printCredentials(w, s)
	printLent(w, s, safe)
	printNetwork(w, s)
	if s.Profile != "" { // recorded by this mosaic: the filter was there
		lifted := "every row (`mosaic doctor` lists them)"
		if len(s.SeccompAllow) > 0 {
			lifted = "every row but " + strings.Join(s.SeccompAllow, ", ") + ", lifted by the profile (`mosaic doctor` lists them)"
		}
		fmt.Fprintf(w, "syscalls:  filtered, EPERM for %s\n", lifted)
	}
	if s.Workspace != "" {
		fmt.Fprintf(w, "workspace: %s", safe(s.Workspace))
		if s.WorkspaceGivenAs != "" {
			fmt.Fprintf(w, " (given as %s, a symlink: the real path is bound)", safe(s.WorkspaceGivenAs))
		}
		fmt.Fprintln(w)
	}
	printMode(w, s, safe)
	if s.HostExecWritable {
		fmt.Fprintln(w, "host-exec: WRITABLE (--allow-write-host-exec): the session may change .git/config, .git/hooks and the other files your tools run from the workspace")
	}
	printBinds(w, s.Binds, safe)
	if s.Sandbox == sandbox.ModeLandlock {
		printLandlockRows(w)
	}
	printOutput(w, s)
}

// printState prints what session s is and where it is: its kind, state,
// problem and times.
func printState(w io.Writer, s manager.Session) {
	fmt.Fprintf(w, "session:   %s (%s)\n", s.Name, s.Unit)
	if s.Kind == units.KindScope {
		fmt.Fprintln(w, "kind:      scope: bwrap's sandbox alone, started by mosaic run --scope on its terminal (no unit sandbox, no journal)")
	} else if s.Sandbox == sandbox.ModeLandlock {
		fmt.Fprintln(w, "kind:      service: systemd's unit sandbox, Landlock inside (--sandbox landlock: no bwrap)")
	} else {
		fmt.Fprintln(w, "kind:      service: systemd's unit sandbox around bwrap's")
	}
	fmt.Fprintf(w, "state:     %s (%s)", s.State, s.SubState)
	if s.Result != "" && s.Result != "success" {
		fmt.Fprintf(w, ", result %s", s.Result)
	}
	if e := s.How(); e != "" && !s.Running() {
		fmt.Fprintf(w, ", %s", e)
	}
	fmt.Fprintln(w)
	if s.Problem != "" {
		fmt.Fprintf(w, "problem:   %s\n", s.Problem)
	}
	if s.Since != nil {
		fmt.Fprintf(w, "started:   %s\n", since(s.Since))
	}
	if s.Ended != nil {
		fmt.Fprintf(w, "ended:     %s\n", since(s.Ended))
	}
}

// printLent prints what session s was lent or given beyond its binds
// (published ports, ssh keys, git, its environment) and what was left out.
func printLent(w io.Writer, s manager.Session, safe func(string) string) {
	if len(s.Published) > 0 {
		fmt.Fprintf(w, "published: %s (host -> session, through %s)\n", strings.Join(s.Published, ", "), units.PublishUnitName(s.Name))
	}
	if len(s.SSHKeysLent) > 0 {
		fmt.Fprintf(w, "ssh keys:  %s (lent through %s; the keys stay in your agent)\n", strings.Join(s.SSHKeysLent, "; "), units.SSHAgentUnitName(s.Name))
	}
	if len(s.GitLent) > 0 {
		fmt.Fprintf(w, "git lent:  %s (the token stays in %s; the session has a placeholder)\n", strings.Join(s.GitLent, "; "), units.EgressUnitName(s.Name))
	}
	if len(s.Environment) > 0 {
		fmt.Fprintf(w, "environment (not secret): %s\n", strings.Join(s.Environment, " "))
	}
	if _, err := os.Stat(filepath.Join(s.OwnGitDir, "HEAD")); s.OwnGitDir != "" && err == nil {
		fmt.Fprintf(w, "git:       the session's own repository is %s, not in the workspace (your git never runs it: git fetch from it is yours to choose)\n", safe(s.OwnGitDir))
	}
	if len(s.EnvironmentDropped) > 0 {
		fmt.Fprintf(w, "environment: not passed from yours, for their values (looking like credentials: pass one with --credential NAME; or holding what an environment file cannot): %s\n", strings.Join(s.EnvironmentDropped, " "))
	}
	for _, d := range s.PathDropped {
		fmt.Fprintf(w, "PATH:      dropped %s\n", safe(d))
	}
}

// printOutput prints where session s's output is, and, while it runs,
// how systemd shows it.
func printOutput(w io.Writer, s manager.Session) {
	switch {
	case s.Output == "pty":
		fmt.Fprintf(w, "output:    a terminal of its own, held by %s: mosaic attach %s (detach: Ctrl-P Ctrl-Q)\n", units.PTYUnitName(s.Name), s.Name)
	case s.Kind == units.KindScope || s.Output == "terminal":
		fmt.Fprintln(w, "output:    went to the terminal or pipes of mosaic run (not the journal)")
	default:
		fmt.Fprintf(w, "output:    mosaic logs %s   (or journalctl --user -t %s%s)\n", s.Name, units.UnitPrefix, s.Name)
	}
	if s.Running() {
		fmt.Fprintf(w, "inspect:   systemctl --user status %s\n", s.Unit)
	}
}

// printStorage says how the session's home and /tmp are bounded, and what
// became of its home when it ended (escaped by safe: a save's error names
// the session's file).
func printStorage(w io.Writer, s manager.Session, safe func(string) string) {
	switch l := s.Limits; {
	case s.Sandbox == sandbox.ModeLandlock:
		fmt.Fprintln(w, "storage:   home and /tmp UNBOUNDED: --sandbox landlock has no mount namespace of mosaic's to bound them (its home is on your disk, its /tmp systemd's private one)")
	case l != nil && l.HomeSize != 0:
		fmt.Fprintf(w, "storage:   home %s, /tmp %s, in memory (charged to its memory limit); a kept home is loaded at the start and saved at the end\n", bound(l.HomeSize, "--home-size"), bound(l.TmpSize, "--tmp-size"))
	}
	if line := s.HomeLine(); line != "" {
		fmt.Fprintf(w, "home:      %s\n", safe(line))
	}
}

// bound says a tmpfs's bound.
func bound(size uint64, flag string) string {
	if size == 0 || size == units.Infinity {
		return "up to half the RAM (" + flag + " infinity)"
	}
	return "at most " + sandbox.SizeText(size) + " (" + flag + ")"
}

// printNetwork says how the session reaches the network, and whether its
// egress proxy died.
func printNetwork(w io.Writer, s manager.Session) {
	switch s.Network {
	case "none":
		fmt.Fprintln(w, "network:   none: loopback only (no route out, no host loopback service, no host abstract socket)")
	case "allow":
		switch {
		case s.EgressDied && s.Running():
			fmt.Fprintf(w, "network:   allow, but its egress proxy (%s) DIED: no network; systemd stops the session with it (its log: journalctl --user -t %s)\n", units.EgressUnitName(s.Name), strings.TrimSuffix(units.EgressUnitName(s.Name), units.UnitSuffix))
		case s.EgressDied:
			fmt.Fprintf(w, "network:   allow, but its egress proxy (%s) DIED, and the session was stopped with it (its log: journalctl --user -t %s)\n", units.EgressUnitName(s.Name), strings.TrimSuffix(units.EgressUnitName(s.Name), units.UnitSuffix))
		default:
			to := "to " + strings.Join(s.AllowHosts, ", ")
			if len(s.AllowHosts) == 0 {
				to = "that allows nothing yet (grant with mosaic allow " + s.Name + " HOST)"
			}
			how := "every connection (any client, any TCP port) and DNS"
			if !s.NetworkDevice {
				how = "clients that honour HTTPS_PROXY only (no network device: run --scope, --sandbox landlock, or /dev/net/tun not yours: mosaic doctor)"
			}
			fmt.Fprintf(w, "network:   allow: %s, only through its egress proxy (%s) %s\n", how, units.EgressUnitName(s.Name), to)
		}
	case "host":
		fmt.Fprintln(w, "network:   host: NOT CONFINED (the host's network and loopback services; its abstract sockets only where the kernel has Landlock ABI 6)")
	}
}

// printCredentials says a session's profile and how each of its
// credentials travels.
func printCredentials(w io.Writer, s manager.Session) {
	if s.Profile != "" {
		creds := "none"
		if len(s.Credentials) > 0 {
			creds = strings.Join(s.Credentials, ", ") + " (through an environment file, deleted once the session started)"
			if s.Kind == units.KindScope {
				creds = strings.Join(s.Credentials, ", ") + " (through the environment of mosaic's exec)"
			}
		}
		fmt.Fprintf(w, "profile:   %s; credentials: %s\n", s.Profile, creds)
		for _, c := range s.Credentials {
			if hosts, ok := s.Injected[c]; ok {
				fmt.Fprintf(w, "  %s: injected by the egress proxy for %s (the session holds a placeholder)\n", c, strings.Join(hosts, ", "))
			} else {
				fmt.Fprintf(w, "  %s: in the environment\n", c)
			}
		}
	}
}

// printBinds lists the sandbox's mounts: the path on one line, why it is
// there on the next (80 columns however long the path).
func printBinds(w io.Writer, binds []sandbox.Bind, safe func(string) string) {
	if len(binds) > 0 {
		fmt.Fprintln(w, "sandbox:")
		for _, b := range binds {
			from := ""
			if b.Src != "" && b.Src != b.Dst {
				from = " (from " + safe(b.Src) + ")"
			}
			fmt.Fprintf(w, "  %-6s %s%s\n         %s\n", b.Kind, safe(b.Dst), from, b.Reason)
		}
	}
}

func pid(p uint32) string {
	if p == 0 {
		return "-"
	}
	return fmt.Sprint(p)
}

// since is a moment as systemctl status writes it, with its age:
// "Mon 2026-11-30 02:02:48 UTC; 5min ago".
func since(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format("Mon 2006-01-02 15:04:05 MST") + "; " + ago(*t)
}

// ago is how long ago t was, in the largest unit that fits: "26ms ago",
// "5min ago", "2h 3min ago", "3 days ago".
func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < 0:
		return "in the future"
	case d < time.Second:
		return fmt.Sprintf("%dms ago", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dmin ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dmin ago", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}

// age is the SINCE column of mosaic list: how long ago, compact.
func age(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return strings.TrimSuffix(ago(*t), " ago")
}

func humanBytes(n *uint64) string {
	if n == nil {
		return "-"
	}
	const unit = 1024
	v, suffix := float64(*n), ""
	for _, s := range []string{"K", "M", "G", "T"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	if suffix == "" {
		return fmt.Sprintf("%dB", *n)
	}
	return fmt.Sprintf("%.1f%s", v, suffix)
}

func count(n *uint64) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprint(*n)
}

func cpu(ns *uint64) string {
	if ns == nil {
		return "-"
	}
	return time.Duration(*ns).Round(time.Millisecond).String()
}

func profilesCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:         "profiles",
		Usage:        "list the agent profiles: built-in ones and yours in ~/.config/mosaic/profiles/NAME.conf, and the host groups; with NAME, every setting of that one",
		ArgsUsage:    "[NAME]",
		Flags:        []cli.Flag{fullFlag, jsonFlag, &cli.BoolFlag{Name: "groups", Usage: "list only the host groups (@npm, ...) with each host and why it is there"}},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.Bool("groups") {
				out.result(egress.Groups(), func(w io.Writer) { printGroups(w, true) })
				return nil
			}
			home, err := os.UserHomeDir()
			if err != nil {
				return errcode.NoHome.New("cannot tell your home directory: %w (set HOME)", err)
			}
			if c.NArg() > 1 {
				return errcode.Usage.New("mosaic profiles [NAME]: name one profile, or none to list them all")
			}
			if c.NArg() == 1 {
				p, err := credentials.FindProfile(credentials.ProfileDir(home), c.Args().First())
				if err != nil {
					return err
				}
				out.result(p, func(w io.Writer) { printProfile(w, p) })
				return nil
			}
			list, broken := credentials.Profiles(credentials.ProfileDir(home))
			for _, err := range broken {
				fmt.Fprintf(out.stderr, "mosaic: warning: a profile was left out: %v\n", err)
			}
			out.result(list, func(w io.Writer) {
				var b strings.Builder
				defer func() { io.WriteString(w, cutLines(b.String(), fitWidth(out, c.Bool("full")))) }()
				tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tBINARY\tTESTED\tNETWORK\tSOURCE\tCREDENTIALS (one set of)")
				for _, p := range list {
					sets := make([]string, len(p.CredentialSets))
					for i, s := range p.CredentialSets {
						sets[i] = strings.Join(s, "+")
					}
					cred := strings.Join(sets, " | ")
					if cred == "" {
						cred = "-"
					}
					bin := p.Binary
					if bin == "" {
						bin = "-"
					}
					network := p.Network
					if network == "allow" {
						network = fmt.Sprintf("allow (%d hosts)", len(p.AllowHosts))
					}
					tested := p.Tested
					if tested == "" {
						tested = "-"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, bin, tested, network, p.Source, cred)
				}
				tw.Flush()
				fmt.Fprintln(&b)
				printGroups(&b, false)
			})
			return nil
		},
	}
}

func rmCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:  "rm",
		Usage: "forget ended sessions: each one's record, its home and /tmp, and its failed unit",
		Description: "A running session is refused (stop it first), and so is a clone-mode session whose change was\n" +
			"neither applied nor discarded, unless --force is given, which stops a running one first (SIGTERM,\n" +
			"SIGKILL after 10s), as docker rm -f does, and removes either. Several sessions are removed in turn.",
		ArgsUsage: "NAME...",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "stop a running session first, and remove a clone-mode session whose change was neither applied nor discarded"},
			jsonFlag,
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			names, err := someNames(c)
			if err != nil {
				return err
			}
			return out.connected(func(ctx context.Context, m *manager.Manager) error {
				return eachName(out, names, func(name string) (any, func(io.Writer), error) {
					if c.Bool("force") {
						if _, _, err := stopOne(ctx, m, out, name, units.DefaultStopTimeout); err != nil {
							return nil, nil, err
						}
					}
					if err := m.Remove(ctx, name, c.Bool("force")); err != nil {
						return nil, nil, err
					}
					return map[string]any{"removed": []string{name}}, func(w io.Writer) { fmt.Fprintf(w, "removed session %s\n", name) }, nil
				})
			})
		},
	}
}

func gcCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:  "gc",
		Usage: "forget every ended session, as mosaic rm does, but those whose home keeps something",
		Description: "A session's home is kept for the next session of its name (an agent's sign-in, its settings):\n" +
			"gc keeps the ended sessions whose home holds anything, and names them; --homes removes those too.",
		Flags:        []cli.Flag{&cli.BoolFlag{Name: "homes", Usage: "also remove ended sessions whose home keeps an agent's sign-in or settings"}, jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			return out.connected(func(ctx context.Context, m *manager.Manager) error {
				removed, kept, unapplied, err := m.GC(ctx, !c.Bool("homes"))
				if err != nil {
					return err
				}
				if removed == nil {
					removed = []string{}
				}
				if kept == nil {
					kept = []string{}
				}
				if unapplied == nil {
					unapplied = []string{}
				}
				out.result(map[string]any{"removed": removed, "kept": kept, "kept_unapplied": unapplied}, func(w io.Writer) {
					switch len(removed) {
					case 0:
						fmt.Fprintln(w, "no ended session to remove")
					default:
						fmt.Fprintf(w, "removed %s: %s\n", plural(len(removed), "ended session"), strings.Join(removed, ", "))
					}
					if len(kept) > 0 {
						fmt.Fprintf(w, "kept %s whose home holds a sign-in or settings: %s (mosaic rm NAME, or mosaic gc --homes)\n",
							plural(len(kept), "ended session"), strings.Join(kept, ", "))
					}
					if len(unapplied) > 0 {
						fmt.Fprintf(w, "kept %s whose change was neither applied nor discarded: %s (mosaic diff NAME, then mosaic apply or mosaic discard)\n",
							plural(len(unapplied), "clone-mode session"), strings.Join(unapplied, ", "))
					}
				})
				return nil
			})
		},
	}
}

// plural is "1 ended session" or "2 ended sessions".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// printLandlockRows says, row by row, what --sandbox landlock confines and
// what it does not, beside bwrap's layer.
func printLandlockRows(w io.Writer) {
	fmt.Fprintln(w, "sandbox:   landlock, compared with bwrap's layer (! = confines less):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range sandbox.LandlockRows {
		mark := " "
		if r.Weaker {
			mark = "!"
		}
		fmt.Fprintf(tw, "  %s %s\t%s\n", mark, r.What, r.Landlock)
		if r.Weaker {
			fmt.Fprintf(tw, "  \t(bwrap: %s)\n", r.Bwrap)
		}
	}
	tw.Flush()
}

func orNone(s string) string {
	if s == "-" {
		return "none"
	}
	return s
}

func percent(n *uint64) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprintf("%d%%", *n)
}

// printProfile prints every setting of one profile, a line each.
func printProfile(w io.Writer, p credentials.Profile) {
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%-13s %s\n", k+":", v)
		}
	}
	line("profile", p.Name)
	line("description", p.Description)
	line("source", p.Source)
	line("binary", p.Binary)
	line("tested", p.Tested)
	sets := make([]string, len(p.CredentialSets))
	for i, s := range p.CredentialSets {
		sets[i] = strings.Join(s, "+")
	}
	line("credentials", strings.Join(sets, " | "))
	line("pass", strings.Join(p.PassEnv, " "))
	line("environment", strings.Join(p.Env, " "))
	line("arguments", strings.Join(p.Args, " "))
	line("read-only", strings.Join(p.ReadOnly, " "))
	line("toolchains", strings.Join(p.Toolchains, " "))
	line("sandbox", p.Sandbox)
	line("network", p.Network)
	for _, h := range p.AllowHosts {
		fmt.Fprintf(w, "  allow %s", h)
		if r := p.HostReasons[h]; r != "" {
			fmt.Fprintf(w, ": %s", r)
		}
		fmt.Fprintln(w)
	}
	for _, r := range p.Inject {
		fmt.Fprintf(w, "  inject %s into %s for %s\n", r.Var, strings.Join(r.Headers, ", "), strings.Join(r.Hosts, ", "))
	}
	for _, g := range p.LendGit {
		fmt.Fprintf(w, "  lend git %s\n", g)
	}
	for _, k := range p.LendSSHKey {
		fmt.Fprintf(w, "  lend ssh key %s\n", k)
	}
	if p.LendSSHSign != "" {
		fmt.Fprintf(w, "  lend ssh key %s to sign only\n", p.LendSSHSign)
	}
	line("seccomp", strings.Join(p.SeccompAllow, " "))
	line("limits", strings.TrimSpace(strings.Join([]string{pre("memory ", p.MemoryMax), pre("tasks ", p.TasksMax), pre("cpu ", p.CPUQuota)}, " ")))
}

func pre(prefix, v string) string {
	if v == "" {
		return ""
	}
	return prefix + v
}

// printMode writes status's lines of the workspace's mode: clone (with
// its base and its change) or direct.
func printMode(w io.Writer, s manager.Session, safe func(string) string) {
	c := s.Clone
	if c == nil {
		if s.Workspace != "" {
			fmt.Fprintln(w, "mode:      "+request.DirectWarning)
		}
		return
	}
	base := "HEAD and your uncommitted changes, " + short(c.Base) + " on " + short(c.Parent)
	if c.Kind == units.ClonePlain {
		base = "the directory's files at the start, " + short(c.Base)
	} else if c.Ref != "" {
		base = "--base " + safe(c.Ref) + ", " + short(c.Base)
	}
	fmt.Fprintf(w, "mode:      clone: the session works in its own copy, never in the workspace (base: %s)\n", base)
	fmt.Fprintf(w, "change:    %s\n", c.Line())
}

// short is a commit id's first 12 digits.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// printGroups prints the host groups, with each host when full.
func printGroups(w io.Writer, full bool) {
	fmt.Fprintln(w, "GROUPS (--allow-host @NAME, AllowHost=@NAME, mosaic allow SESSION @NAME; mosaic profiles --groups lists each host; the package registries read only, but with @NAME:write)")
	for _, g := range egress.Groups() {
		fmt.Fprintf(w, "@%s: %s\n", g.Name, g.Purpose)
		if !full {
			continue
		}
		if len(g.Of) > 0 {
			fmt.Fprintf(w, "  = @%s\n", strings.Join(g.Of, " + @"))
		}
		for _, h := range g.Hosts {
			fmt.Fprintf(w, "  %s  %s\n", h.Host, h.Why)
		}
		for _, h := range g.Plain {
			fmt.Fprintf(w, "  %s  (plain HTTP, GET and HEAD only) %s\n", h.Host, h.Why)
		}
		for _, h := range g.Publish {
			fmt.Fprintf(w, "  %s  (with @%s%s only) %s\n", h.Host, g.Name, egress.WriteSuffix, h.Why)
		}
	}
}
