package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/internal/termtext"
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
	// evalApprovalTimeout expires an action (a call of an MCP tool that
	// acts) at once: nobody approves during an eval, no action may run
	// there, and the default 24 hours would hold the run until --timeout.
	// The scorecard records what was proposed.
	evalApprovalTimeout = time.Millisecond
	// cancelTimeout bounds the request that cancels a case's workflow.
	cancelTimeout = 10 * time.Second
	// cancelCloseWait bounds the wait for a cancelled run to close: it
	// still writes (its transcript, the sub-agent's memory votes) until it
	// does, and the next case's store is emptied only after.
	cancelCloseWait = 2 * time.Minute
	// maxRepeat bounds --repeat.
	maxRepeat = 50
)

type evalOptions struct {
	cases       []string
	concurrency int
	asJSON      bool
	timeout     time.Duration
	// minAccuracy and maxMissed are checked only when given (their flag
	// Changed): a marker value such as -1 passed as a given value did
	// switch the check off.
	minAccuracy    float64
	hasMinAccuracy bool
	maxMissed      int
	hasMaxMissed   bool
	repeat         int
	baseline       bool
	isolate        bool
	// tablesConfig is the worker's BigQuery tables config: the tables case
	// rows may go to, in its project.
	tablesConfig string
	// anyDatabase lets --isolate=false write into a database whose ID does
	// not end in -eval.
	anyDatabase bool
	// store is the starter's Firestore database and taskQueue its task
	// queue: the worker that answers must use the same database.
	store     firestoreTarget
	taskQueue string
}

func (a *app) evalCommand() *cobra.Command {
	var o evalOptions
	cmd := &cobra.Command{
		Use:   "eval [--cases DIR|FILE...]",
		Short: "Score the configured model on labelled cases: confusion matrix, missed intrusions, evidence recall, a no-tools baseline, spread over repeats",
		Long: `Runs every labelled case (examples/evals/README.md) through the real
Investigation workflow on the running worker, with whatever model the worker
is configured with, and prints one row per case (expected verdict, the
verdicts given, evidence cited, the baseline's verdict, steps, tool calls,
model calls, tokens, wall time), a confusion matrix with each verdict's
recall, and the totals: verdict accuracy, balanced accuracy (the mean
per-class recall: answering one verdict always scores 1/classes), missed
intrusions (a true_positive judged benign or false_positive) and evidence
recall, which counts only expected evidence neither the alert nor the case's
question already holds (the model is shown both).

--baseline (on by default) also runs each case as an alert-only baseline:
the same workflow, model and conclusion prompt, but the conclusion is
written from the alert alone, with no plan and no tool call. Its scores are
printed beside the agent's: what the investigation adds is the difference.
--repeat N runs each case N times (and the baseline N times) and prints
the spread: each case's verdicts and agreement, and min / median / max of
the scores over the N passes.

--isolate (on by default) empties the eval's Firestore database before each
case and stores only that case's alerts, so that no alert, memory or
transcript carries over between cases; the runs of one case share it.
It only ever empties a database of the Firestore emulator whose ID ends in
-eval (--firestore-database): go tool task eval runs its own worker on
investigator-eval. The worker must report the same database, or nothing
runs. --isolate=false shares one store, still only a database whose ID
ends in -eval unless --allow-any-database is given. Log rows a case declares (bigquery_rows) are added to the
BigQuery emulator for that case and removed after it.

Each run is a workflow eval-<case>[-baseline][-r<n>]-<time> that closes
after its first conclusion. An action (a call of an MCP tool that acts)
is never approved: it expires at once, and the report lists it under
ACTIONS PROPOSED. A run that fails or times out is counted as failed, with
its error; a timed-out run is cancelled, and the next case waits for it to
close. --json also records the starter's commit, the options and the
worker's queue, database and tools. When the worker's model is a local server (the
offline Gemini stand-in), a warning above and below the report says the
scores mean nothing.

Exit code 0 when every run concluded; 1 when one did not, when
--min-accuracy or --max-missed-intrusions is given and not met, or when no
worker answers.`,
		Example: `  starter eval --firestore-database investigator-eval --task-queue investigations-eval
  starter eval --cases examples/evals/cases/waf-sqli-cms-editor.yaml --json
  starter eval --repeat 3 --concurrency 4 --min-accuracy 0.8 --max-missed-intrusions 0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.hasMinAccuracy = cmd.Flags().Changed("min-accuracy")
			o.hasMaxMissed = cmd.Flags().Changed("max-missed-intrusions")
			return a.eval(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.cases, "cases", []string{defaultCases}, "case files or directories of them (repeat or separate with commas)")
	f.IntVar(&o.concurrency, "concurrency", 2, "runs investigated at the same time (with --isolate, only runs of the same case)")
	f.BoolVar(&o.asJSON, "json", false, "print the scorecard as JSON")
	f.DurationVar(&o.timeout, "timeout", 15*time.Minute, "longest a run may take to conclude; then its investigation is cancelled")
	f.Float64Var(&o.minAccuracy, "min-accuracy", 0, "exit 1 when the verdict accuracy is below this fraction (0.8 for 80%)")
	f.IntVar(&o.maxMissed, "max-missed-intrusions", 0, "exit 1 when more true_positive runs than this were judged benign or false_positive")
	f.IntVar(&o.repeat, "repeat", 1, fmt.Sprintf("runs of each case (at most %d); above 1 the report shows the spread", maxRepeat))
	f.BoolVar(&o.baseline, "baseline", true, "also run each case from the alert alone, without plan or tools, and print its scores beside")
	f.BoolVar(&o.isolate, "isolate", true, "empty the eval's Firestore emulator database (--firestore-database, its ID ending in -eval) before each case")
	f.BoolVar(&o.anyDatabase, "allow-any-database", false, "with --isolate=false, write the cases' alerts and made-up history into the Firestore database even when its ID does not end in -eval (an analyst's or production's); never needed with go tool task eval")
	f.StringVar(&o.tablesConfig, "bigquery-tables", config.Env("", "BIGQUERY_TABLES_CONFIG"), "the worker's BigQuery tables config, naming the tables case rows may go to (env BIGQUERY_TABLES_CONFIG)")
	return cmd
}

// evalBackend is what an eval needs from the services; tests give a fake.
type evalBackend interface {
	// catalog asks the worker for its tools and model.
	catalog(ctx context.Context) (investigation.Catalog, error)
	// prepare stores the cases' alerts and adds their log rows, after
	// emptying the store when fresh; the function it returns removes the
	// rows again.
	prepare(ctx context.Context, cases []evalCase, fresh bool) (func(), error)
	// investigate runs one investigation of the case as workflow id until
	// it closes, from the alert alone when baseline, and returns the
	// result or one sentence.
	investigate(ctx context.Context, c evalCase, id string, baseline bool) (investigation.Result, error)
}

// newEvalBackend connects to Firestore, Temporal and, when a case adds
// log rows, the BigQuery emulator (tests replace it).
var newEvalBackend = func(a *app, cmd *cobra.Command, o evalOptions, cases []evalCase) (evalBackend, func(), error) {
	ctx := cmd.Context()
	store := &evalStore{http: &http.Client{Timeout: a.timeout()}, call: a.firestoreCall}
	if o.isolate {
		var err error
		if store.clearURL, err = checkIsolation(o.store); err != nil {
			return nil, nil, err
		}
	}
	bq, tables, err := caseBigQuery(ctx, cases, o.tablesConfig, config.BigQuery{}.EmulatorHost())
	if err != nil {
		return nil, nil, err
	}
	store.bq, store.tables = bq, tables
	closeBQ := func() {
		if bq != nil {
			bq.Close()
		}
	}
	as, closeStore, err := a.alertStore(cmd)
	if err != nil {
		closeBQ()
		return nil, nil, err
	}
	store.alerts = as
	c, err := a.dial()
	if err != nil {
		closeStore()
		closeBQ()
		return nil, nil, err
	}
	// Once, for the warnings about unregistered search attributes.
	c.WarnSearchAttributes(ctx, cmd.ErrOrStderr())
	b := &temporalEval{c: c, store: store, timeout: o.timeout, closeWait: cancelCloseWait}
	return b, func() { c.Close(); closeStore(); closeBQ() }, nil
}

func (a *app) eval(cmd *cobra.Command, o evalOptions) error {
	switch {
	case o.concurrency < 1:
		return fmt.Errorf("--concurrency must be at least 1, not %d", o.concurrency)
	case o.timeout <= 0:
		return fmt.Errorf("--timeout must be positive, not %s", o.timeout)
	case !(o.minAccuracy >= 0 && o.minAccuracy <= 1): // NaN too
		return fmt.Errorf("--min-accuracy must be a fraction between 0 and 1 (0.8 for 80%%), not %g", o.minAccuracy)
	case o.maxMissed < 0:
		return fmt.Errorf("--max-missed-intrusions must be 0 or more, not %d", o.maxMissed)
	case o.repeat < 1 || o.repeat > maxRepeat:
		return fmt.Errorf("--repeat must be between 1 and %d, not %d", maxRepeat, o.repeat)
	case o.anyDatabase && o.isolate:
		return errors.New("--allow-any-database goes only with --isolate=false: --isolate empties only an eval's database")
	}
	o.taskQueue = a.temporal.TaskQueue
	project, emulator := a.firestore.Target() // as the worker's catalog says it (checkWorkerStore)
	o.store = firestoreTarget{emulator: emulator, project: project, database: a.firestore.Database}
	if err := checkStarterStore(o); err != nil {
		return err
	}
	cases, err := loadCases(fromUserDir(o.cases, os.Getenv("EVAL_USER_CWD")))
	if err != nil {
		return err
	}
	b, done, err := newEvalBackend(a, cmd, o, cases)
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
	return outcomeError(s, o)
}

// evalRun is one investigation the eval runs: run n (from 0) of a case, as
// the agent or as the baseline.
type evalRun struct {
	c        int // index in the cases
	n        int
	baseline bool
}

// runEval asks the worker which model it calls, runs the cases and scores
// them; progress lines go to log. With o.isolate the cases run one after
// another, each on a freshly emptied store, and only the runs of one case
// run at the same time (at most o.concurrency); otherwise every run shares
// the store and any o.concurrency runs go together. It fails only when the
// worker does not answer, or the shared store cannot be prepared: then no
// case could run.
func runEval(ctx context.Context, b evalBackend, cases []evalCase, o evalOptions, log io.Writer) (scorecard, error) {
	s := scorecard{Repeat: o.repeat, Isolated: o.isolate}
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
	if err := checkWorkerStore(cat.Store, o); err != nil {
		return s, err
	}
	s.Setup = &evalSetup{StarterBuild: starterBuild(), StartedAt: time.Now().UTC().Truncate(time.Second), TaskQueue: o.taskQueue, Database: o.store.database,
		Options: setupOptions{Cases: nonNil(o.cases), Concurrency: o.concurrency, Repeat: o.repeat, Timeout: o.timeout.String(),
			Baseline: o.baseline, Isolate: o.isolate, AllowAnyDatabase: o.anyDatabase},
		Tools: []string{}, MCP: cat.MCP}
	for _, tl := range cat.Tools {
		if !tl.Enabled {
			continue
		}
		name := termtext.Line(tl.Name) // the worker's text
		if tl.Acts {
			name += " (acts)"
		}
		s.Setup.Tools = append(s.Setup.Tools, name)
	}
	if o.anyDatabase {
		fmt.Fprintf(log, "WARNING: --allow-any-database: the cases' alerts and made-up history go into Firestore database %q, and the worker's memories of them wherever the worker keeps its data.\n", o.store.database)
	}
	s.Cases = make([]caseResult, len(cases))
	var runs [][]evalRun // per case
	total := 0
	for i, c := range cases {
		s.Cases[i] = caseResult{Name: c.Name, Expected: c.Expected, Evidence: nonNil(c.novel()), InAlert: nonNil(c.InAlert),
			Runs: make([]runResult, o.repeat)}
		var rs []evalRun
		for n := range o.repeat {
			rs = append(rs, evalRun{c: i, n: n})
		}
		if o.baseline {
			s.Cases[i].Baseline = make([]runResult, o.repeat)
			for n := range o.repeat {
				rs = append(rs, evalRun{c: i, n: n, baseline: true})
			}
		}
		runs = append(runs, rs)
		total += len(rs)
	}
	how := "each case on an emptied store"
	if !o.isolate {
		how = "sharing one store"
	}
	fmt.Fprintf(log, "eval: %s, %s (%d at a time), %s\n", casesText(len(cases)), runsText(total), o.concurrency, how)

	var mu sync.Mutex
	finished := 0
	record := func(r evalRun, res runResult) {
		mu.Lock()
		defer mu.Unlock()
		c := &s.Cases[r.c]
		what := fmt.Sprintf("run %d/%d", r.n+1, o.repeat)
		if r.baseline {
			c.Baseline[r.n] = res
			what = fmt.Sprintf("baseline %d/%d", r.n+1, o.repeat)
		} else {
			c.Runs[r.n] = res
		}
		finished++
		status := res.Verdict
		if res.Error != "" {
			status = "error: " + res.Error
		}
		fmt.Fprintf(log, "eval: [%d/%d] %s (%s): %s (%s)\n", finished, total, c.Name, what, status, wallText(res.Wall))
	}
	// run investigates the given runs, at most o.concurrency at a time.
	run := func(rs []evalRun) {
		sem := make(chan struct{}, o.concurrency)
		var wg sync.WaitGroup
		for _, r := range rs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				record(r, runCase(ctx, b, cases[r.c], r, o))
			}()
		}
		wg.Wait()
	}
	// fail records the same error for every run of rs.
	fail := func(rs []evalRun, why string) {
		for _, r := range rs {
			record(r, runResult{Error: why, Cited: []string{}})
		}
	}

	if o.isolate {
		for i, c := range cases {
			if ctx.Err() != nil {
				fail(runs[i], "not run: the eval was interrupted")
				continue
			}
			undo, err := b.prepare(ctx, []evalCase{c}, true)
			if err != nil {
				fail(runs[i], "could not prepare the case: "+err.Error())
			} else {
				run(runs[i])
			}
			if undo != nil {
				undo()
			}
		}
	} else {
		undo, err := b.prepare(ctx, cases, false)
		if undo != nil {
			defer undo()
		}
		if err != nil {
			return s, err
		}
		var all []evalRun
		for _, rs := range runs {
			all = append(all, rs...)
		}
		run(all)
	}
	s.sum()
	return s, nil
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

// runCase runs one investigation of a case and scores what it concluded.
func runCase(ctx context.Context, b evalBackend, c evalCase, run evalRun, o evalOptions) runResult {
	r := runResult{Cited: []string{}}
	if ctx.Err() != nil {
		r.Error = "not run: the eval was interrupted"
		return r
	}
	name := c.Name
	if run.baseline {
		name += "-baseline"
	}
	if o.repeat > 1 {
		name += fmt.Sprintf("-r%d", run.n+1)
	}
	r.WorkflowID = agentclient.WorkflowID("eval", name, time.Now())
	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	start := time.Now()
	res, err := b.investigate(cctx, c, r.WorkflowID, run.baseline)
	r.Wall = time.Since(start)
	if err == nil && run.baseline && (res.ToolCalls > 0 || len(res.Plan.Steps) > 0) {
		err = fmt.Errorf("the worker planned and called tools in an alert-only baseline: it is older than this starter, so rebuild and restart it, or pass --baseline=false")
	}
	if err != nil {
		r.Error = err.Error()
		return r
	}
	if res.Verdict != nil {
		r.Verdict, r.Confidence = res.Verdict.Verdict, res.Verdict.Confidence
	}
	r.Correct = r.Verdict == c.Expected
	r.Cited = citedEvidence(c.novel(), res.Conclusion, res.Verdict)
	r.Steps = res.Plan.Count(plan.Done)
	r.ToolCalls = res.ToolCalls
	r.ModelCalls = res.Usage.Calls
	for _, a := range res.Actions {
		// The worker's text (the model's arguments): made safe to print.
		r.Actions = append(r.Actions, proposedAction{Tool: termtext.Line(a.Tool), Args: termtext.Line(a.Args), Status: termtext.Line(a.Status)})
	}
	// Thinking is billed as output, as the starter's totals line counts it.
	r.PromptTokens, r.OutputTokens = res.Usage.PromptTokens, res.Usage.OutputTokens+res.Usage.ThoughtTokens
	return r
}

// temporalEval runs cases on the real services.
type temporalEval struct {
	c       evalClient
	store   *evalStore
	timeout time.Duration // the --timeout, for messages
	// closeWait bounds the wait for a cancelled run to close.
	closeWait time.Duration
}

// evalClient is what temporalEval needs of *agentclient.Client.
type evalClient interface {
	Catalog(ctx context.Context) (investigation.Catalog, error)
	Start(ctx context.Context, s agentclient.Start, warn io.Writer) error
	Result(ctx context.Context, id string) (investigation.Result, error)
	Cancel(ctx context.Context, id string) error
}

func (t *temporalEval) catalog(ctx context.Context) (investigation.Catalog, error) {
	return t.c.Catalog(ctx)
}

func (t *temporalEval) prepare(ctx context.Context, cases []evalCase, fresh bool) (func(), error) {
	if fresh {
		if err := t.store.reset(ctx); err != nil {
			return nil, err
		}
	}
	return t.store.load(ctx, cases)
}

func (t *temporalEval) investigate(ctx context.Context, c evalCase, id string, baseline bool) (investigation.Result, error) {
	var res investigation.Result
	summary := fmt.Sprintf("Eval case %s: %s", c.Name, c.Alert.Title)
	if baseline {
		summary = fmt.Sprintf("Eval baseline (alert only) %s: %s", c.Name, c.Alert.Title)
	}
	err := t.c.Start(ctx, agentclient.Start{ID: id, Summary: summary, Input: evalInput(c, baseline)}, io.Discard)
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
	// A cancelled run writes until it closes: the store is emptied for the
	// next case only after it has, or after the bounded wait.
	wctx, stop := context.WithTimeout(context.Background(), t.closeWait)
	defer stop()
	if _, err := t.c.Result(wctx, id); err != nil && wctx.Err() != nil {
		return res, fmt.Errorf("%s; investigation %s was cancelled but had not closed %s later, so it may still write into the next case's store", why, id, t.closeWait)
	}
	return res, fmt.Errorf("%s; investigation %s was cancelled", why, id)
}

// evalInput is the input of one run of a case: nothing in it waits for a
// person, since nobody is there during an eval.
func evalInput(c evalCase, baseline bool) investigation.Input {
	return investigation.Input{
		AlertID:  c.Alert.ID,
		Question: c.Question,
		Language: "en",
		Limits: investigation.Limits{AnswerTimeout: investigation.Duration(evalAnswerTimeout),
			ApprovalTimeout: investigation.Duration(evalApprovalTimeout)},
		IdleTimeout:       investigation.Duration(evalIdleTimeout),
		ConcludeFromAlert: baseline,
	}
}

// fromUserDir resolves relative case paths that exist under dir (the
// directory `go tool task eval` was run from; scripts/eval.sh runs from the
// repository root) against it; the others stay relative to the root, where
// the default cases are.
func fromUserDir(paths []string, dir string) []string {
	if dir == "" {
		return paths
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = p
		if q := filepath.Join(dir, p); !filepath.IsAbs(p) && p != "" {
			if _, err := os.Stat(q); err == nil {
				out[i] = q
			}
		}
	}
	return out
}
