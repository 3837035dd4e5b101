package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"mosaic/units/errcode"

	"github.com/urfave/cli/v2"

	"mosaic/credentials"
	"mosaic/manager"
	"mosaic/units"
)

func listCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:         "list",
		Usage:        "list the sessions systemd has; with --all also the ended ones kept until `mosaic rm` or `mosaic gc`",
		Flags:        []cli.Flag{&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "also list ended sessions"}, jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			return connected(func(ctx context.Context, m *manager.Manager) error {
				list, err := m.List(ctx)
				if c.Bool("all") {
					list, err = m.ListAll(ctx)
				}
				if err != nil {
					return err
				}
				if list == nil {
					list = []manager.Session{}
				}
				out.result(list, func(w io.Writer) { printList(w, list) })
				return nil
			})
		},
	}
}

// printList prints sessions as a table.
func printList(w io.Writer, list []manager.Session) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tSTATE\tSUB\tPID\tSINCE\tMEMORY\tENDED")
	for _, s := range list {
		ended := "-"
		if !s.Running() && s.How() != "" {
			ended = s.How()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Kind, s.State, s.SubState, pid(s.MainPID), since(s.Since), humanBytes(s.MemoryBytes), ended)
	}
	tw.Flush()
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
			return connected(func(ctx context.Context, m *manager.Manager) error {
				s, err := m.Status(ctx, name)
				if err != nil {
					return err
				}
				out.result(s, func(w io.Writer) { printStatus(w, s) })
				return nil
			})
		},
	}
}

func printStatus(w io.Writer, s manager.Session) {
	fmt.Fprintf(w, "session:   %s (%s)\n", s.Name, s.Unit)
	if s.Kind == units.KindScope {
		fmt.Fprintln(w, "kind:      scope: bwrap's sandbox alone, started by mosaic run --scope on its terminal (no unit sandbox, no journal)")
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
	if s.Since != nil {
		fmt.Fprintf(w, "started:   %s\n", since(s.Since))
	}
	if s.Ended != nil {
		fmt.Fprintf(w, "ended:     %s\n", since(s.Ended))
	}
	if len(s.Command) > 0 {
		fmt.Fprintf(w, "command:   %s\n", strings.Join(s.Command, " "))
	}
	if s.MainPID != 0 || len(s.PIDs) > 0 {
		fmt.Fprintf(w, "pids:      main %s, all %v\n", pid(s.MainPID), s.PIDs)
	}
	fmt.Fprintf(w, "resources: memory %s, tasks %s, cpu %s\n", humanBytes(s.MemoryBytes), count(s.Tasks), cpu(s.CPUNSec))
	if s.Profile != "" {
		creds := "none"
		if len(s.Credentials) > 0 {
			creds = strings.Join(s.Credentials, ", ") + " (through an environment file, deleted once the session started)"
			if s.Kind == units.KindScope {
				creds = strings.Join(s.Credentials, ", ") + " (through the environment of mosaic's exec)"
			}
		}
		fmt.Fprintf(w, "profile:   %s; credentials: %s\n", s.Profile, creds)
	}
	if len(s.Environment) > 0 {
		fmt.Fprintf(w, "environment (not secret): %s\n", strings.Join(s.Environment, " "))
	}
	switch s.Network {
	case "none":
		fmt.Fprintln(w, "network:   none: loopback only (no route out, no host loopback service, no host abstract socket)")
	case "allow":
		fmt.Fprintf(w, "network:   allow: only through its egress proxy (%s) to %s\n", units.EgressUnitName(s.Name), strings.Join(s.AllowHosts, ", "))
	case "host":
		fmt.Fprintln(w, "network:   host: NOT CONFINED (the host's network, its loopback services and abstract sockets)")
	}
	if s.Workspace != "" {
		fmt.Fprintf(w, "workspace: %s", s.Workspace)
		if s.WorkspaceGivenAs != "" {
			fmt.Fprintf(w, " (given as %s, a symlink: the real path is bound)", s.WorkspaceGivenAs)
		}
		fmt.Fprintln(w)
	}
	if len(s.Binds) > 0 {
		fmt.Fprintln(w, "sandbox:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, b := range s.Binds {
			src := b.Src
			if src == "" || src == b.Dst {
				src = "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", b.Kind, b.Dst, src, b.Reason)
		}
		tw.Flush()
	}
	if s.Kind == units.KindScope {
		fmt.Fprintf(w, "inspect:   systemctl --user status %s\n", s.Unit)
		return
	}
	fmt.Fprintf(w, "inspect:   systemctl --user status %s; journalctl --user -u %s\n", s.Unit, s.Unit)
}

func pid(p uint32) string {
	if p == 0 {
		return "-"
	}
	return fmt.Sprint(p)
}

func since(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
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
		Usage:        "list the agent profiles: built-in ones and yours in ~/.config/mosaic/profiles/NAME.conf",
		Flags:        []cli.Flag{jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			home, err := os.UserHomeDir()
			if err != nil {
				return errcode.NoHome.New("cannot tell your home directory: %v (set HOME)", err)
			}
			list, err := credentials.Profiles(credentials.ProfileDir(home))
			if err != nil {
				return err
			}
			out.result(list, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tBINARY\tTESTED\tNETWORK\tCREDENTIALS (one set of)\tSOURCE")
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
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, bin, tested, network, cred, p.Source)
				}
				tw.Flush()
			})
			return nil
		},
	}
}

func rmCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:         "rm",
		Usage:        "forget an ended session: its record, its home and /tmp, and its failed unit",
		ArgsUsage:    "NAME",
		Flags:        []cli.Flag{jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			name, err := oneName(c)
			if err != nil {
				return err
			}
			return connected(func(ctx context.Context, m *manager.Manager) error {
				if err := m.Remove(ctx, name); err != nil {
					return err
				}
				out.result(map[string]any{"removed": []string{name}}, func(w io.Writer) { fmt.Fprintf(w, "removed session %s\n", name) })
				return nil
			})
		},
	}
}

func gcCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:         "gc",
		Usage:        "forget every ended session, as mosaic rm does",
		Flags:        []cli.Flag{jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			return connected(func(ctx context.Context, m *manager.Manager) error {
				removed, err := m.GC(ctx)
				if err != nil {
					return err
				}
				if removed == nil {
					removed = []string{}
				}
				out.result(map[string]any{"removed": removed}, func(w io.Writer) {
					fmt.Fprintf(w, "removed %d ended sessions\n", len(removed))
				})
				return nil
			})
		},
	}
}
