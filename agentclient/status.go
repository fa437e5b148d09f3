package agentclient

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"

	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/investigation"
)

// Status queries where an investigation stands. A closed investigation,
// or an open one no worker answers for (its version's workers are gone),
// is read from the status its run stored last (progress.Store), when there
// is one.
func (c *Client) Status(ctx context.Context, id string) (investigation.Status, error) {
	st, _, err := c.status(ctx, id)
	return st, err
}

// status is Status with a note when an open investigation's status was
// read from the store because no worker answered.
func (c *Client) status(ctx context.Context, id string) (investigation.Status, string, error) {
	session := id
	// storeDown is the store not answering: said if the query fails too
	// (where the store was asked first, a closed run, for any reason).
	var storeDown error
	if c.progress != nil {
		// A closed run answers a query only by a worker replaying it.
		if d, err := c.src.describe(ctx, id, ""); err == nil {
			session = d.session(id)
			if d.closed() {
				st, _, ok, err := c.storedStatus(ctx, session)
				if ok {
					return st, "", nil
				}
				storeDown = err
			}
		}
	}
	asked := time.Now()
	st, err := c.src.status(ctx, id)
	if err != nil {
		waited := time.Since(asked)
		if storeDown != nil && ctx.Err() == nil && !IsNotFound(err) {
			return st, "", storeDown
		}
		// Only when no worker answered in time: an error a worker or the
		// codec gave (a payload this key cannot decrypt) is the answer.
		if !noAnswer(ctx, err) || ctx.Err() != nil {
			return st, "", c.statusError(ctx, id, err, waited)
		}
		if storeDown == nil {
			stored, at, ok, serr := c.storedStatus(ctx, session)
			if ok {
				return stored, fmt.Sprintf("(as its run stored it at %s: no worker answered for it)", at.Local().Format(time.DateTime)), nil
			}
			storeDown = serr
		}
		if storeDown != nil {
			return st, "", storeDown
		}
		return st, "", c.statusError(ctx, id, err, waited)
	}
	return st, "", nil
}

// storedStatus reads the status an investigation's run stored last under
// its session, under the call timeout; err is the sentence saying the
// store did not answer in time (any other failure is only not ok).
func (c *Client) storedStatus(ctx context.Context, session string) (st investigation.Status, at time.Time, ok bool, err error) {
	if c.progress == nil {
		return st, at, false, nil
	}
	var found bool
	err = c.storeCall(ctx, func(ctx context.Context) (err error) {
		st, at, found, err = c.progress.Status(ctx, session)
		return err
	})
	if err != nil {
		if IsUnavailable(err) {
			return st, at, false, err
		}
		return st, at, false, nil
	}
	return st, at, found, nil
}

// ShowStatus writes an investigation's status for people, with its
// workflow's execution status when Temporal can say, or as JSON.
func (c *Client) ShowStatus(ctx context.Context, w io.Writer, id string, asJSON bool) error {
	st, note, err := c.status(ctx, id)
	if err != nil {
		return err
	}
	if asJSON {
		// The status with its estimated cost, as the follower's last JSON line has it.
		return WriteJSON(w, struct {
			investigation.Status
			Cost Cost `json:"cost"`
		}{st, estimate(st.Spend, c.prices)})
	}
	run := ""
	if d, err := c.src.describe(ctx, id, ""); err == nil {
		run = statusWord(d.status)
	}
	if note != "" {
		fmt.Fprintln(w, note)
	}
	RenderStatus(w, id, run, st, c.prices)
	return nil
}

// noAnswer says a query failed because no worker answered it in time,
// by its gRPC code, whatever the text: the server's "query timed out
// before a worker could process it", the SDK's own deadline (half the
// query's context), or the stream reset as that deadline fires, which
// gRPC reports as Canceled. Canceled is an answer's absence only while
// the caller's ctx is live (else the caller gave up).
func noAnswer(ctx context.Context, err error) bool {
	switch serviceerror.ToStatus(err).Code() {
	case codes.DeadlineExceeded:
		return true
	case codes.Canceled:
		return ctx.Err() == nil
	}
	return false
}

// waitText is how long a call waited, as people read it: whole seconds,
// or hundredths under a second.
func waitText(d time.Duration) string {
	if d >= time.Second {
		return d.Round(time.Second).String()
	}
	return d.Round(10 * time.Millisecond).String()
}

// statusError is the sentence for a failed status query that waited so long.
func (c *Client) statusError(ctx context.Context, id string, err error, waited time.Duration) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted before investigation %s answered", id)
	case IsNotFound(err):
		return fmt.Errorf("no investigation with ID %s", id)
	case strings.Contains(err.Error(), "unknown queryType"):
		return fmt.Errorf("investigation %s does not answer status queries: it runs an older version of the workflow", id)
	case noAnswer(ctx, err):
		return fmt.Errorf("investigation %s did not answer within %s: is a worker running on task queue %q?", id, waitText(waited), c.cfg.TaskQueue)
	}
	return fmt.Errorf("query the status of investigation %s: %v", id, err)
}

// RenderStatus writes a status snapshot for people; run is the workflow's
// execution status ("running", "completed"), if known.
func RenderStatus(w io.Writer, id, run string, st investigation.Status, prices pricing.Table) {
	fmt.Fprintf(w, "Investigation %s\n", id)
	phase := st.Phase
	if run != "" && run != "running" {
		phase += ", workflow " + run
	}
	fmt.Fprintf(w, "  phase:    %s\n  turn:     %d\n  request:  %s\n", oneLine(phase), st.Turn, indent(st.Request, "            "))
	if st.StopReason != "" {
		fmt.Fprintf(w, "  stopping: %s\n", oneLine(st.StopReason))
	}
	fmt.Fprintln(w)
	if st.Plan.Objective != "" || len(st.Plan.Steps) > 0 {
		printPlan(w, st.Plan, true)
	} else {
		fmt.Fprintln(w, "PLAN  (none yet)")
	}
	// Each item on its line, as the follower prints insights and hints.
	section := func(title string, items []string) {
		if len(items) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, it := range items {
			fmt.Fprintf(w, "  - %s\n", oneLine(it))
		}
	}
	if len(st.Insights) == 0 {
		fmt.Fprintln(w, "\nInsights: (none yet)")
	}
	insights := make([]string, len(st.Insights))
	for i, in := range st.Insights {
		insights[i] = fmt.Sprintf("%s (turn %d, %s)", in.Text, in.Turn, stepName(in.Step))
	}
	section("Insights", insights)
	if st.Verdict != nil {
		printVerdict(w, st.Verdict)
	}
	if len(st.VerdictHistory) > 1 {
		history := make([]string, len(st.VerdictHistory))
		for i, h := range st.VerdictHistory {
			history[i] = fmt.Sprintf("turn %d: %s (%s)", h.Turn, h.Verdict, h.Confidence)
			if h.Reason != "" {
				history[i] += ": " + oneLine(h.Reason)
			}
		}
		section("Verdict history", history)
	}
	section("Hints", st.Hints)
	if len(st.Questions) > 0 {
		fmt.Fprintln(w, "\nQuestions waiting for an answer:")
		for _, q := range st.Questions {
			fmt.Fprintf(w, "  %s: %s (asked by %s) — answer with: starter answer %s --question %s \"...\"\n", oneLine(q.ID), oneLine(q.Question), stepName(q.Step), id, oneLine(q.ID))
		}
	}
	if len(st.Actions) > 0 {
		fmt.Fprintln(w, "\nActions (calls of tools that act):")
		for _, a := range st.Actions {
			fmt.Fprintf(w, "  %s: %s %s (asked by %s) — %s", oneLine(a.CallID), oneLine(a.Tool), termtext.Reveal(a.Args), stepName(a.Step), strings.ToUpper(oneLine(a.Status)))
			switch {
			case a.Status == investigation.ActionPending:
				fmt.Fprintf(w, ": starter approve-call %s %s | starter deny-call %s %s \"reason\"", id, oneLine(a.CallID), id, oneLine(a.CallID))
			case a.Note != "":
				fmt.Fprintf(w, " (%s)", oneLine(a.Note))
			}
			fmt.Fprintln(w)
		}
	}
	section("Queued follow-up questions", st.FollowUps)
	printIntake(w, st.Intake) // intake.go
	fmt.Fprintf(w, "\n%d events, %s\n", st.LastSeq, spendText(st.Spend, prices))
	switch st.Phase {
	case investigation.PhaseAwaitingApproval:
		fmt.Fprintf(w, "PLAN AWAITS APPROVAL: starter approve %s | starter revise %s \"...\"\n", id, id)
	case investigation.PhaseIdle:
		if run == "" || run == "running" {
			fmt.Fprintf(w, "(the investigation stays open for follow-up questions: starter ask %s \"...\")\n", id)
		}
	}
}
