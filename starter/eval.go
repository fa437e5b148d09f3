package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/plan"
)

// defaultCases is where the project's labelled cases live.
const defaultCases = "examples/evals/cases"

const (
	// evalIdleTimeout closes an eval investigation right after its first
	// conclusion: nobody asks follow-up questions.
	evalIdleTimeout = time.Millisecond
	// evalAnswerTimeout answers an ask_user question with "no answer" at
	// once: nobody is there to answer during an eval.
	evalAnswerTimeout = time.Second
	// cancelTimeout bounds the request that cancels a case's workflow.
	cancelTimeout = 10 * time.Second
)

type evalOptions struct {
	cases       []string
	concurrency int
	asJSON      bool
	timeout     time.Duration
	minAccuracy float64
}

func (a *app) evalCommand() *cobra.Command {
	var o evalOptions
	cmd := &cobra.Command{
		Use:   "eval [--cases DIR|FILE...]",
		Short: "Score the configured model on labelled cases: verdict accuracy, evidence recall, tokens, time",
		Long: `Runs every labelled case (examples/evals/README.md) through the real
Investigation workflow on the running worker, with whatever model the worker
is configured with, and prints one table: expected and actual verdict, the
evidence cited (expected strings found in the conclusion or the verdict's
evidence), steps, tool calls, model calls, tokens and wall time; then verdict
accuracy, evidence recall, mean tokens and mean wall time.

Each case imports its alert and the past alerts it names into Firestore
(idempotently), starts a workflow eval-<case>-<time> that closes after its
first conclusion, and waits for it. A case that fails or times out is a row
with its error. When the worker's model is a local server (the offline Gemini
stand-in), a warning above and below the table says the scores mean nothing.

Exit code 0 when every case concluded; 1 when one did not, when
--min-accuracy is given and not met, or when no worker answers.`,
		Example: `  starter eval
  starter eval --cases examples/evals/cases/waf-sqli-cms-editor.yaml --json
  starter eval --cases my-cases/ --concurrency 4 --min-accuracy 0.8`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("min-accuracy") {
				o.minAccuracy = -1
			}
			return a.eval(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.cases, "cases", []string{defaultCases}, "case files or directories of them (repeat or separate with commas)")
	f.IntVar(&o.concurrency, "concurrency", 2, "cases investigated at the same time")
	f.BoolVar(&o.asJSON, "json", false, "print the scorecard as JSON")
	f.DurationVar(&o.timeout, "timeout", 15*time.Minute, "longest a case may take to conclude; then its investigation is cancelled")
	f.Float64Var(&o.minAccuracy, "min-accuracy", 0, "exit 1 when the verdict accuracy is below this fraction (0.8 for 80%)")
	return cmd
}

// evalBackend is what an eval needs from the services; tests give a fake.
type evalBackend interface {
	// catalog asks the worker for its tools and model.
	catalog(ctx context.Context) (investigation.Catalog, error)
	// investigate imports the case's alerts, runs its investigation as
	// workflow id until it closes, and returns the result or one sentence.
	investigate(ctx context.Context, c evalCase, id string) (investigation.Result, error)
}

// newEvalBackend connects to Firestore and Temporal (tests replace it).
var newEvalBackend = func(a *app, cmd *cobra.Command, o evalOptions) (evalBackend, func(), error) {
	store, closeStore, err := a.alertStore(cmd)
	if err != nil {
		return nil, nil, err
	}
	c, err := a.dial()
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	// Once, for the warnings about unregistered search attributes.
	c.WarnSearchAttributes(cmd.Context(), cmd.ErrOrStderr())
	b := &temporalEval{c: c, store: store, timeout: o.timeout}
	return b, func() { c.Close(); closeStore() }, nil
}

func (a *app) eval(cmd *cobra.Command, o evalOptions) error {
	switch {
	case o.concurrency < 1:
		return fmt.Errorf("--concurrency must be at least 1, not %d", o.concurrency)
	case o.timeout <= 0:
		return fmt.Errorf("--timeout must be positive, not %s", o.timeout)
	case o.minAccuracy > 1 || (o.minAccuracy < 0 && o.minAccuracy != -1):
		return fmt.Errorf("--min-accuracy must be a fraction between 0 and 1 (0.8 for 80%%), not %g", o.minAccuracy)
	}
	cases, err := loadCases(o.cases)
	if err != nil {
		return err
	}
	b, done, err := newEvalBackend(a, cmd, o)
	if err != nil {
		return err
	}
	defer done()
	s, err := runEval(cmd.Context(), b, cases, o, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if o.asJSON {
		err = printScorecardJSON(out, s)
	} else {
		err = printScorecard(out, s)
	}
	if err != nil {
		return err
	}
	return outcomeError(s.Totals, o.minAccuracy)
}

// runEval asks the worker which model it calls, runs the cases (at most
// o.concurrency at a time) and scores them; progress lines go to log. It
// fails only when the worker does not answer: then no case could run.
func runEval(ctx context.Context, b evalBackend, cases []evalCase, o evalOptions, log io.Writer) (scorecard, error) {
	var s scorecard
	cat, err := b.catalog(ctx)
	if err != nil {
		return s, err
	}
	if cat.Model.Model == "" && cat.Model.BaseURL == "" {
		s.Warning = "WARNING: the worker did not say which model it calls (it is older than starter eval): if it is the offline stand-in, these scores mean nothing."
	} else {
		s.Model = &cat.Model
		if cat.Model.Local {
			s.Warning = standInWarning(cat.Model)
		}
	}
	if s.Warning != "" {
		fmt.Fprintln(log, s.Warning)
	}
	fmt.Fprintf(log, "eval: %s, %d at a time\n", casesText(len(cases)), min(o.concurrency, len(cases)))
	s.Cases = make([]caseResult, len(cases))
	var mu sync.Mutex
	finished := 0
	sem := make(chan struct{}, o.concurrency)
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := runCase(ctx, b, c, o.timeout)
			mu.Lock()
			defer mu.Unlock()
			s.Cases[i] = r
			finished++
			status := r.Verdict
			if r.Error != "" {
				status = "error: " + r.Error
			}
			fmt.Fprintf(log, "eval: [%d/%d] %s: %s (%s)\n", finished, len(cases), c.Name, status, wallText(r.Wall))
		}()
	}
	wg.Wait()
	s.sum()
	return s, nil
}

// runCase investigates one case and scores what it concluded.
func runCase(ctx context.Context, b evalBackend, c evalCase, timeout time.Duration) caseResult {
	r := caseResult{Name: c.Name, Expected: c.Expected, Evidence: c.Evidence, Cited: []string{}}
	if ctx.Err() != nil {
		r.Error = "not run: the eval was interrupted"
		return r
	}
	r.WorkflowID = agentclient.WorkflowID("eval", c.Name, time.Now())
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	res, err := b.investigate(cctx, c, r.WorkflowID)
	r.Wall = time.Since(start)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	if res.Verdict != nil {
		r.Verdict, r.Confidence = res.Verdict.Verdict, res.Verdict.Confidence
	}
	r.Correct = r.Verdict == c.Expected
	r.Cited = citedEvidence(c.Evidence, res.Conclusion, res.Verdict)
	r.Steps = res.Plan.Count(plan.Done)
	r.ToolCalls = res.ToolCalls
	r.ModelCalls = res.Usage.Calls
	// Thinking is billed as output, as the starter's totals line counts it.
	r.PromptTokens, r.OutputTokens = res.Usage.PromptTokens, res.Usage.OutputTokens+res.Usage.ThoughtTokens
	return r
}

// temporalEval runs cases on the real services.
type temporalEval struct {
	c       *agentclient.Client
	store   *alerts.Store
	timeout time.Duration // the --timeout, for messages
}

func (t *temporalEval) catalog(ctx context.Context) (investigation.Catalog, error) {
	return t.c.Catalog(ctx)
}

func (t *temporalEval) investigate(ctx context.Context, c evalCase, id string) (investigation.Result, error) {
	var res investigation.Result
	for _, al := range append(c.History, c.Alert) {
		if err := t.store.Put(ctx, al); err != nil {
			return res, fmt.Errorf("could not store alert %s: %v", al.ID, err)
		}
	}
	err := t.c.Start(ctx, agentclient.Start{
		ID:      id,
		Summary: fmt.Sprintf("Eval case %s: %s", c.Name, c.Alert.Title),
		Input: investigation.Input{
			AlertID:     c.Alert.ID,
			Question:    c.Question,
			Language:    "en",
			Limits:      investigation.Limits{AnswerTimeout: investigation.Duration(evalAnswerTimeout)},
			IdleTimeout: investigation.Duration(evalIdleTimeout),
		},
	}, io.Discard)
	if err != nil {
		return res, fmt.Errorf("could not start the investigation: %v", err)
	}
	res, err = t.c.Result(ctx, id)
	if err == nil {
		return res, nil
	}
	if ctx.Err() == nil {
		return res, fmt.Errorf("the investigation failed: %s", agentclient.FailureMessage(err))
	}
	// Timed out or interrupted: the investigation would go on spending tokens.
	why := fmt.Sprintf("no conclusion within %s", t.timeout)
	if ctx.Err() == context.Canceled {
		why = "interrupted"
	}
	cctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	if err := t.c.Cancel(cctx, id); err != nil {
		return res, fmt.Errorf("%s, and cancelling investigation %s failed: %v", why, id, err)
	}
	return res, fmt.Errorf("%s; investigation %s was cancelled", why, id)
}
