package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/activities/bigquery/memory"
	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/termtext"
)

func (a *app) memoryCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "Review, list, show and delete the BigQuery sub-agent's memories",
		Long: `The BigQuery sub-agent learns claims about the schema and SQL of its tables.
A new claim is proposed: no session recalls it until you approve it (unless
the worker runs with --auto-approve-memories and the claim is written only
in SQL about its own columns; what a value or column means always waits
for you). Approved memories gain and
lose score as later sessions find them helpful or harmful, and one below -3
is deleted.

  starter memory list --proposed    what waits for review
  starter memory show ID            one memory in full
  starter memory approve ID...      later sessions recall it
  starter memory reject ID...       never recalled, never proposed again`,
	}
	// withStore runs fn on the memory store, under the Firestore deadline.
	withStore := func(cmd *cobra.Command, fn func(ctx context.Context, s *memory.Store) error) error {
		fs, err := a.firestore.Client(cmd.Context())
		if err != nil {
			return err
		}
		defer fs.Close()
		s := memory.NewStore(fs)
		return a.firestoreCall(cmd.Context(), func(ctx context.Context) error { return fn(ctx, s) })
	}
	var (
		limit    int
		proposed bool
		status   string
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List memories, highest score first (--proposed: those waiting for review)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st := memory.Status(status)
			switch {
			case proposed && status != "":
				return fmt.Errorf("use --proposed or --status, not both")
			case proposed:
				st = memory.StatusProposed
			case st != "" && st != memory.StatusProposed && st != memory.StatusApproved && st != memory.StatusRejected:
				return fmt.Errorf("--status %q: use proposed, approved or rejected", status)
			}
			var ms []memory.Memory
			if err := withStore(cmd, func(ctx context.Context, s *memory.Store) (err error) {
				ms, err = s.List(ctx, limit, st)
				return err
			}); err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSTATUS\tSCORE\tUPDATED\tTABLE\tCLAIM")
			for _, m := range ms {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", m.ID, m.Status, m.Score, m.UpdatedAt.UTC().Format(time.DateTime),
					termtext.Line(orDash(m.Table)), clip.String(termtext.Line(m.Claim), 100))
				// The request was written from the alert: an approver reads
				// it as context, labelled, never as a reason to approve.
				if q := strings.TrimSpace(m.QueryText); q != "" {
					fmt.Fprintf(w, "\t\t\t\t\t%s%s\n", untrustedLabel, clip.String(termtext.Line(q), 100))
				}
			}
			return w.Flush()
		},
	}
	list.Flags().IntVar(&limit, "limit", 100, "most memories to list")
	list.Flags().BoolVar(&proposed, "proposed", false, "only the proposed memories, which wait for review and are never recalled")
	list.Flags().StringVar(&status, "status", "", "only memories with this status: proposed, approved or rejected")

	review := func(to memory.Status, use, short string) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ID...",
			Short: short,
			Args:  cobra.MinimumNArgs(1),
			RunE: func(cmd *cobra.Command, ids []string) error {
				for _, id := range ids {
					var m memory.Memory
					if err := withStore(cmd, func(ctx context.Context, s *memory.Store) (err error) {
						m, err = s.Review(ctx, id, to)
						return err
					}); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s: %s\n", to, m.ID, clip.String(termtext.Line(m.Claim), 100))
				}
				return nil
			},
		}
	}
	cmd.AddCommand(list, &cobra.Command{
		Use:   "show ID",
		Short: "Show one memory as JSON (without its embedding)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var m memory.Memory
			if err := withStore(cmd, func(ctx context.Context, s *memory.Store) (err error) {
				m, err = s.Get(ctx, args[0])
				return err
			}); err != nil {
				return err
			}
			return agentclient.WriteJSON(cmd.OutOrStdout(), m)
		},
	},
		review(memory.StatusApproved, "approve", "Approve memories: later sessions recall them, vote on them and prune them"),
		review(memory.StatusRejected, "reject", "Reject memories: never recalled, and the same claim is not proposed again"),
		&cobra.Command{
			Use:   "delete ID",
			Short: "Delete one memory (a later session may propose its claim again)",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := withStore(cmd, func(ctx context.Context, s *memory.Store) error { return s.Delete(ctx, args[0]) }); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
				return nil
			},
		})
	return cmd
}

// untrustedLabel heads the request a memory was learned from in memory
// list.
const untrustedLabel = "untrusted request text (from the alert): "

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
