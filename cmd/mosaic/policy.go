package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"mosaic/internal/errcode"
	"mosaic/manager/request"
)

// policyCommand shows the policy every session of this user is judged by:
// each rule with the file and line it comes from, so that a refusal's
// rule can be found and read.
func policyCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:  "policy",
		Usage: "show the machine's policy (" + request.MachinePolicyFile + "): the ceiling on what a session may be given, each rule with its file and line",
		Description: "Every rule of " + request.MachinePolicyFile + " (root's) and of the file $" + request.PolicyEnv + " names, if any, applies to\n" +
			"every session: a request beyond one is refused (policy-refused, exit 3) before anything starts. Your flags,\n" +
			"profiles and mosaic.conf cannot lift a rule.",
		ArgsUsage:    "[DIR]",
		Flags:        []cli.Flag{jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return errcode.Usage.New("mosaic policy takes at most one DIR, a workspace whose " + request.ProjectFile + " to show too")
			}
			pol, err := request.ReadPolicy()
			if err != nil {
				return err
			}
			if pol.Files == nil {
				pol.Files = []string{}
			}
			if pol.Rules == nil {
				pol.Rules = []request.PolicyRule{}
			}
			proj, _, err := projectOf(out, c.Args().First())
			if err != nil {
				return err
			}
			doc := policyDocument{Policy: pol, Project: proj}
			out.result(doc, func(w io.Writer) { printPolicy(w, out, doc) })
			return nil
		},
	}
}

// policyDocument is what `mosaic policy --json` says: the policy's files
// and rules, and the project file of the workspace asked about, if any.
type policyDocument struct {
	request.Policy
	Project *request.Project `json:"project"`
}

// printPolicy writes the policy as a table: rule, value, where, meaning;
// then the project file's rules and asks.
func printPolicy(w io.Writer, out *output, doc policyDocument) {
	pol := doc.Policy
	if doc.Project != nil {
		defer printProject(w, out, doc.Project)
	}
	if len(pol.Rules) == 0 {
		fmt.Fprintf(w, "no policy: %s does not exist or holds no rule, so a session may be given whatever you ask\n", request.MachinePolicyFile)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tVALUE\tFROM\tMEANING")
	for _, r := range pol.Rules {
		v := r.Value
		if v == "" {
			v = "(none)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Key, v, r.Where(), r.Explain())
	}
	tw.Flush()
}
