package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/investigation"
)

type investigateOptions struct {
	alertFile string
	alertID   string
	question  string
	lang      string
	detach    bool
	asJSON    bool
	limits    investigation.Limits
	approve   bool
	idle      time.Duration
}

func (a *app) investigateCommand() *cobra.Command {
	var o investigateOptions
	cmd := &cobra.Command{
		Use:   "investigate (--alert FILE | --alert-id ID)",
		Short: "Start an investigation of an alert and follow its progress",
		Long: `Validates the alert, stores it in Firestore, starts the Investigation workflow,
prints its workflow ID and Web UI link, then shows the plan, each step, tool
calls, insights and plan updates as they happen, and finally the conclusion in
Markdown. The investigation then stays open for follow-up questions (starter
ask) until --idle-timeout passes; this command exits once the first
conclusion is printed. Exit code 0 when the investigation concludes, 1 when
it fails. Ctrl-C (exit code 130; SIGTERM: 143) stops following, not the
investigation, and prints the starter watch ID --from N command that resumes
after the last event shown.

With --approve-plan the investigation waits after planning until the analyst
runs starter approve ID (or starter revise ID "what to change").

With --json, standard output holds one JSON object per line: each event as
the workflow recorded it, then a last line of kind "result" with the
verdict and totals (starter watch --help says more); the workflow ID, its
link and warnings go to standard error.`,
		Example: `  starter investigate --alert examples/alerts/guardduty-ssh-bruteforce.json
  cat alert.json | starter investigate --alert - --lang ja
  starter investigate --alert-id guardduty-3f9a1c0d2b4e --question "Was the login successful?" --detach
  starter investigate --alert alert.json --approve-plan --max-tool-calls 20 --time-budget 10m
  starter investigate --alert alert.json --json | tail -n 1 | jq -r .verdict.verdict`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.investigate(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.alertFile, "alert", "", "alert JSON file to investigate, or - for stdin")
	f.StringVar(&o.alertID, "alert-id", "", "ID of an alert already imported")
	f.StringVar(&o.question, "question", "", "what to find out (default: a thorough investigation of the alert)")
	f.StringVar(&o.lang, "lang", "en", "language of the conclusion: en or ja")
	f.BoolVar(&o.detach, "detach", false, "start the investigation and exit without following it")
	f.BoolVar(&o.asJSON, "json", false, "print each event, and the verdict and totals last, as one JSON line (the rest on standard error)")
	f.IntVar(&o.limits.MaxSteps, "max-steps", investigation.DefaultMaxSteps, "most steps a plan may hold")
	f.IntVar(&o.limits.MaxParallelSteps, "max-parallel-steps", investigation.DefaultMaxParallelSteps, "most steps running at once (steps the planner marks independent run side by side; 1 runs every step in order)")
	f.IntVar(&o.limits.MaxIterations, "max-iterations", investigation.DefaultMaxIterations, "most model turns per step")
	f.IntVar(&o.limits.MaxToolCalls, "max-tool-calls", investigation.DefaultMaxToolCalls, "most tool calls per exchange (the investigation, then each follow-up question); then the investigation concludes from what it found")
	f.DurationVar((*time.Duration)(&o.limits.TimeBudget), "time-budget", investigation.DefaultTimeBudget, "most time per exchange (the investigation, then each follow-up question), not counting waits for the analyst; then the investigation concludes from what it found")
	f.DurationVar((*time.Duration)(&o.limits.AnswerTimeout), "answer-timeout", investigation.DefaultAnswerTimeout, "how long a question the investigation asks (starter answer) waits for the analyst")
	f.DurationVar((*time.Duration)(&o.limits.ApprovalTimeout), "approval-timeout", investigation.DefaultApprovalTimeout, "how long an action (a call of an MCP tool that acts) waits for starter approve-call or deny-call before it expires; the wait does not count against --time-budget")
	f.IntVar(&o.limits.MaxHistoryEvents, "max-history-events", investigation.DefaultMaxHistoryEvents, fmt.Sprintf("history length after which an idle investigation continues as new (at least %d)", investigation.MinMaxHistoryEvents))
	o.limits.MaxScanBytes = investigation.DefaultMaxScanBytes
	f.Var(bytesFlag{&o.limits.MaxScanBytes}, "max-scan-bytes", "most bytes the whole investigation's BigQuery queries may scan, like 10GiB or 500MiB; a query estimated over what is left is refused")
	f.BoolVar(&o.approve, "approve-plan", false, "wait after planning until the plan is approved (starter approve ID) or revised (starter revise ID \"...\")")
	f.DurationVar(&o.idle, "idle-timeout", investigation.DefaultIdleTimeout, "how long the concluded investigation stays open for follow-up questions (starter ask)")
	cmd.MarkFlagsMutuallyExclusive("alert", "alert-id")
	cmd.MarkFlagsOneRequired("alert", "alert-id")
	return cmd
}

func (a *app) investigate(cmd *cobra.Command, o investigateOptions) error {
	ctx := cmd.Context()
	if _, ok := investigation.Languages[o.lang]; !ok {
		return fmt.Errorf("unsupported language %q: use en or ja", o.lang)
	}
	// Given but empty, a flag passes cobra's one-of-these check.
	switch {
	case cmd.Flags().Changed("alert") && o.alertFile == "":
		return errors.New("the --alert path is empty: give the alert JSON file, or - for standard input")
	case cmd.Flags().Changed("alert-id") && strings.TrimSpace(o.alertID) == "":
		return errors.New("the --alert-id is empty: give the ID of an imported alert (starter alert list)")
	}
	if err := o.check(); err != nil {
		return err
	}
	// Validate the input before touching any service: bad input never starts a workflow.
	var al alerts.Alert
	if o.alertFile != "" {
		var err error
		if al, err = a.readAlert(ctx, o.alertFile); err != nil {
			return err
		}
	}
	fs, err := a.firestore.Client(ctx)
	if err != nil {
		return err
	}
	defer fs.Close()
	store := alerts.NewStore(fs)
	// Temporal is dialled, and its search attributes listed, while the
	// alert is stored (or read): the start needs both, and neither waits
	// for the other. The follower reads progress through the same
	// Firestore connection.
	type dialed struct {
		c   *agentclient.Client
		err error
	}
	dialing := make(chan dialed, 1)
	go func() {
		c, err := a.dialWith(fs, nil)
		if err == nil {
			c.LoadSearchAttributes(ctx)
		}
		dialing <- dialed{c, err}
	}()
	if err := a.firestoreCall(ctx, func(ctx context.Context) (err error) {
		if o.alertFile != "" {
			return store.Put(ctx, al)
		}
		al, err = store.Get(ctx, o.alertID)
		return err
	}); err != nil {
		go func() {
			if d := <-dialing; d.c != nil {
				d.c.Close()
			}
		}()
		return err
	}
	d := <-dialing
	if d.err != nil {
		return d.err
	}
	c := d.c
	defer c.Close()
	id := agentclient.WorkflowID("investigation", al.ID, time.Now())
	err = c.Start(ctx, agentclient.Start{
		ID:      id,
		Summary: fmt.Sprintf("Investigate %s: %s", al.ID, al.Title),
		Input: investigation.Input{
			AlertID:     al.ID,
			Question:    o.question,
			Language:    o.lang,
			Limits:      o.limits,
			ApprovePlan: o.approve,
			IdleTimeout: investigation.Duration(o.idle),
		},
	}, cmd.ErrOrStderr())
	if agentclient.IsUnavailable(err) {
		return err
	}
	if err != nil {
		return fmt.Errorf("start the investigation: %w", err)
	}
	out := info(cmd, o.asJSON)
	fmt.Fprintf(out, "Investigating alert %s (%s, %s severity): %s\n", al.ID, termtext.Line(al.Type), al.Severity, termtext.Line(al.Title))
	fmt.Fprintf(out, "Workflow ID: %s\nWeb UI:      %s\n\n", id, c.WorkflowURL(id))
	if o.approve {
		fmt.Fprintf(out, "The plan waits for approval: starter approve %s (or starter revise %s \"what to change\")\n\n", id, id)
	}
	if o.detach {
		fmt.Fprintf(out, "Follow it with: starter watch %s\n", id)
		return nil
	}
	return c.FollowInvestigation(ctx, a.renderer(cmd, id, o.asJSON), id)
}

// check rejects limits that cannot work, before anything is started.
func (o investigateOptions) check() error {
	switch {
	case o.limits.MaxSteps < 1 || o.limits.MaxSteps > investigation.MaxMaxSteps:
		return fmt.Errorf("--max-steps must be between 1 and %d, not %d", investigation.MaxMaxSteps, o.limits.MaxSteps)
	case o.limits.MaxParallelSteps < 1 || o.limits.MaxParallelSteps > investigation.MaxMaxParallelSteps:
		return fmt.Errorf("--max-parallel-steps must be between 1 and %d, not %d", investigation.MaxMaxParallelSteps, o.limits.MaxParallelSteps)
	case o.limits.MaxIterations < 1 || o.limits.MaxIterations > investigation.MaxMaxIterations:
		return fmt.Errorf("--max-iterations must be between 1 and %d, not %d", investigation.MaxMaxIterations, o.limits.MaxIterations)
	case o.limits.MaxToolCalls < 1 || o.limits.MaxToolCalls > investigation.MaxMaxToolCalls:
		return fmt.Errorf("--max-tool-calls must be between 1 and %d, not %d", investigation.MaxMaxToolCalls, o.limits.MaxToolCalls)
	case o.limits.TimeBudget <= 0 || o.limits.TimeBudget.Duration() > investigation.MaxTimeBudget:
		return fmt.Errorf("--time-budget must be positive and at most %s, not %s", investigation.MaxTimeBudget, o.limits.TimeBudget)
	case o.limits.ApprovalTimeout <= 0:
		return fmt.Errorf("--approval-timeout must be positive, not %s", o.limits.ApprovalTimeout)
	case o.limits.AnswerTimeout <= 0:
		return fmt.Errorf("--answer-timeout must be positive, not %s", o.limits.AnswerTimeout)
	case o.limits.MaxHistoryEvents < investigation.MinMaxHistoryEvents:
		return fmt.Errorf("--max-history-events must be at least %d (a run needs room for a whole turn before it continues as new), not %d", investigation.MinMaxHistoryEvents, o.limits.MaxHistoryEvents)
	case o.limits.MaxScanBytes < 1:
		return fmt.Errorf("--max-scan-bytes must be at least 1 byte, not %d", o.limits.MaxScanBytes)
	case o.idle <= 0:
		return fmt.Errorf("--idle-timeout must be positive, not %s", o.idle)
	}
	return nil
}
