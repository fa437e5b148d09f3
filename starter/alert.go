package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/termtext"
)

func (a *app) alertCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "alert", Short: "Import, list and show stored alerts"}
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List stored alerts, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, done, err := a.alertStore(cmd)
			if err != nil {
				return err
			}
			defer done()
			var found []alerts.Alert
			if err := a.firestoreCall(cmd.Context(), func(ctx context.Context) (err error) {
				found, err = store.List(ctx, limit)
				return err
			}); err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSOURCE\tSEVERITY\tTYPE\tTITLE\tIMPORTED")
			for _, al := range found {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", al.ID, al.Source, al.Severity, termtext.Line(al.Type),
					clip.String(termtext.Line(al.Title), 60), al.ImportedAt.UTC().Format(time.DateTime))
			}
			return w.Flush()
		},
	}
	list.Flags().IntVar(&limit, "limit", 50, "most alerts to list")
	cmd.AddCommand(&cobra.Command{
		Use:   "import FILE...",
		Short: "Validate alert JSON files (or - for stdin) and store them in Firestore",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var parsed []alerts.Alert
			var errs []error
			for _, path := range args {
				al, err := a.readAlert(cmd.Context(), path)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				parsed = append(parsed, al)
			}
			if len(parsed) > 0 {
				store, done, err := a.alertStore(cmd)
				if err != nil {
					return err
				}
				defer done()
				for _, al := range parsed {
					err := a.firestoreCall(cmd.Context(), func(ctx context.Context) error { return store.Put(ctx, al) })
					if agentclient.IsUnavailable(err) {
						return importErrors(append(errs, err)) // the next alerts would wait just as long
					}
					if err != nil {
						errs = append(errs, err)
						continue
					}
					fmt.Fprintf(cmd.OutOrStdout(), "imported %s  %s %s (%s): %s\n", al.ID, al.Source, termtext.Line(al.Type), al.Severity, termtext.Line(al.Title))
				}
			}
			return importErrors(errs)
		},
	}, list, a.alertPublishCommand(), &cobra.Command{
		Use:   "show ID",
		Short: "Show one stored alert as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, done, err := a.alertStore(cmd)
			if err != nil {
				return err
			}
			defer done()
			var al alerts.Alert
			if err := a.firestoreCall(cmd.Context(), func(ctx context.Context) (err error) {
				al, err = store.Get(ctx, args[0])
				return err
			}); err != nil {
				return err
			}
			return agentclient.WriteJSON(cmd.OutOrStdout(), al)
		},
	})
	return cmd
}

// importErrors is the one sentence for the files alert import could not
// import (each error names its file), or nil.
func importErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return fmt.Errorf("%d alerts were not imported: %s", len(errs), strings.Join(msgs, "; "))
}

// readAlert reads and validates one alert file; it touches no service.
func (a *app) readAlert(ctx context.Context, path string) (alerts.Alert, error) {
	raw, err := alerts.Read(ctx, path, a.stdin)
	if err != nil {
		return alerts.Alert{}, err
	}
	al, err := alerts.Parse(raw)
	if err != nil {
		return alerts.Alert{}, fmt.Errorf("%s: %w", displayName(path), err)
	}
	return al, nil
}

func (a *app) alertStore(cmd *cobra.Command) (*alerts.Store, func(), error) {
	fs, err := a.firestore.Client(cmd.Context())
	if err != nil {
		return nil, nil, err
	}
	return alerts.NewStore(fs), func() { fs.Close() }, nil
}

func displayName(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}
