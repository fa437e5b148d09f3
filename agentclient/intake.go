package agentclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/investigation"
)

// The intake's calls to Temporal: the intake processes send alerts to the
// admission workflow (Admit), people read and steer it (IntakeStatus,
// Release), and the admission workflow's activities start investigations
// (StartIntake) and check which are still open (ClosedOf).

// Memo fields of an investigation the intake started: what a later alert
// of the same identity is compared with once it closed, and the session
// its transcript and progress are stored under (Input.Session), which
// followers and status read (execution.session).
const (
	memoIdentity = "intake_identity"
	memoSeverity = "intake_severity"
	memoSession  = "investigation_session"
)

// intakeSession is the session of the run an admission starts: the workflow
// ID and the admission's time, so a run under the ID of a closed one never
// meets that run's transcript, sub-agents, BigQuery jobs or progress, and
// every attempt of one start names the same session.
func intakeSession(id string, admitted time.Time) string {
	return investigation.IntakeSession(id, admitted)
}

// Admit sends a batch of alerts to the admission workflow of the client's
// task queue, starting it if it is not running (update-with-start), and
// returns one outcome per alert. The update is retried under one update ID
// while the call timeout allows, so a retry after a lost answer is not
// admitted twice.
func (c *Client) Admit(ctx context.Context, req intake.AdmitRequest) (intake.AdmitResult, error) {
	var res intake.AdmitResult
	id := intake.AdmissionID(c.cfg.TaskQueue)
	updateID := fmt.Sprintf("admit-%d-%s", time.Now().UnixNano(), req.Alerts[0].AlertID)
	err := c.call(ctx, func(ctx context.Context) error {
		for {
			start := c.tc.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
				ID: id, TaskQueue: intake.AdmissionQueue(c.cfg.TaskQueue),
				WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
				StaticSummary:            "Intake admission: the waiting room of task queue " + c.cfg.TaskQueue,
			}, intake.AdmissionWorkflowName, struct{}{})
			h, err := c.tc.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
				StartWorkflowOperation: start,
				UpdateOptions: client.UpdateWorkflowOptions{
					UpdateID: updateID, UpdateName: intake.AdmitUpdate, Args: []any{req},
					WaitForStage: client.WorkflowUpdateStageCompleted,
				},
			})
			if err == nil {
				err = h.Get(ctx, &res)
			}
			if err == nil || !retryAdmit(err) || ctx.Err() != nil {
				return err
			}
			// The run continued as new, or the server is busy: again, to
			// the current run, under the same update ID.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	return res, err
}

// retryAdmit says an admit failed for a reason that passes: the run it
// reached closed (continue-as-new), the server was busy, or the workflow
// task that took the update failed (the server retries the task).
func retryAdmit(err error) bool {
	var busy *serviceerror.ResourceExhausted
	var gone *serviceerror.NotFound
	var unavailable *serviceerror.Unavailable
	var notReady *serviceerror.WorkflowNotReady
	return errors.As(err, &busy) || errors.As(err, &gone) || errors.As(err, &unavailable) || errors.As(err, &notReady) ||
		strings.Contains(err.Error(), "workflow execution already completed") || strings.Contains(err.Error(), "update was aborted")
}

// IntakeStatus queries the admission workflow of the client's task queue.
func (c *Client) IntakeStatus(ctx context.Context) (intake.Status, error) {
	var st intake.Status
	id := intake.AdmissionID(c.cfg.TaskQueue)
	err := c.call(ctx, func(ctx context.Context) error {
		v, err := c.tc.QueryWorkflow(ctx, id, "", intake.StatusQuery)
		if err != nil {
			return err
		}
		return v.Get(&st)
	})
	if IsNotFound(err) {
		return st, fmt.Errorf("no intake has run on task queue %q yet (no workflow %s): start one with starter intake", c.cfg.TaskQueue, id)
	}
	return st, err
}

// Release lets waiting investigations start despite the daily budget. It
// is retried, under one update ID, while the server is busy or the task
// that took it failed, so a release sent twice is recorded once.
func (c *Client) Release(ctx context.Context, rel intake.Release) (intake.Released, error) {
	var out intake.Released
	id := intake.AdmissionID(c.cfg.TaskQueue)
	updateID := fmt.Sprintf("release-%d", time.Now().UnixNano())
	err := c.call(ctx, func(ctx context.Context) error {
		for attempt := 1; ; attempt++ {
			h, err := c.tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
				WorkflowID: id, UpdateID: updateID, UpdateName: intake.ReleaseUpdate, Args: []any{rel}, WaitForStage: client.WorkflowUpdateStageCompleted,
			})
			if err == nil {
				err = h.Get(ctx, &out)
			}
			var gone *serviceerror.NotFound
			if err == nil || errors.As(err, &gone) || !retryAdmit(err) || attempt == maxTaskFailures {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	if IsNotFound(err) {
		return out, fmt.Errorf("no intake has run on task queue %q yet (no workflow %s)", c.cfg.TaskQueue, id)
	}
	return out, err
}

// IntakeStart starts the investigation of an entity the admission workflow
// admitted.
type IntakeStart struct {
	Start
	// Admitted is when it was admitted: a run of ID that started since is
	// this very start, made by an earlier attempt.
	Admitted time.Time
	Severity string
	// Reinvestigate starts a new run even if the identity's last run
	// closed within RepeatWindow (its severity rose).
	Reinvestigate bool
	RepeatWindow  time.Duration
}

// Outcomes of StartIntake.
const (
	IntakeStarted = "started" // started now, or by an earlier attempt of this start
	IntakeRunning = "running" // a run of the identity was already open: it is the investigation
	IntakeRepeat  = "repeat"  // its last run closed within the repeat window, at no lower severity
)

// StartIntake starts an investigation the intake admitted, under its
// identity's workflow ID: an open run of that ID is used as it is (Temporal
// keeps one run per ID open), and one that closed within the repeat window
// at no lower severity makes the alert a repeat, even when the admission
// workflow no longer remembers it. It returns the outcome, the run ID and,
// when the outcome is running, the open run's session (its memo's, "" when
// it has none of this ID's form): the admission workflow tells a run that
// already said it closed from one it forgot. found says the outcome is
// started by an earlier attempt of this start (the run's memo names this
// start's session, or names none and the run started since Admitted):
// this call's input reached no run.
func (c *Client) StartIntake(ctx context.Context, s IntakeStart, warn io.Writer) (outcome, runID, session string, found bool, err error) {
	err = c.call(ctx, func(ctx context.Context) error {
		d, err := c.tc.DescribeWorkflowExecution(ctx, s.ID, "")
		switch {
		case IsNotFound(err):
		case err != nil:
			return err
		default:
			info := d.GetWorkflowExecutionInfo()
			runID = info.GetExecution().GetRunId()
			// This start's own run (an earlier attempt's, its answer lost)
			// is the one whose memo names this start's session: a run
			// continued as new (the memo goes with it) starts anew, so an
			// older run of the ID may have started since the admission. A
			// memo without a session (a run from before sessions) leaves
			// only the start time to tell.
			var memo string
			if p := info.GetMemo().GetFields()[memoSession]; p != nil && c.dc.FromPayload(p, &memo) != nil {
				memo = ""
			}
			own := memo == intakeSession(s.ID, s.Admitted) || memo == "" && !info.GetStartTime().AsTime().Before(s.Admitted)
			if info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
				outcome = IntakeRunning
				if own {
					outcome, found = IntakeStarted, true
					return nil
				}
				// The memo is anyone's who started a run under the ID: only a
				// session of this ID's form reaches the admission's history.
				if memo != s.ID && investigation.CheckSession(s.ID, memo) == nil {
					session = memo
				}
				return nil
			}
			if own {
				outcome, found = IntakeStarted, true // it ran, and closed already
				return nil
			}
			var before string
			if p := info.GetMemo().GetFields()[memoSeverity]; p != nil {
				_ = c.dc.FromPayload(p, &before)
			}
			closed := info.GetCloseTime().AsTime()
			// Only a run that completed investigated the alert: one that
			// failed, was cancelled, terminated or timed out makes no repeats.
			completed := info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED
			if completed && !s.Reinvestigate && before != "" && time.Since(closed) < s.RepeatWindow && intake.Rank(s.Severity) <= intake.Rank(before) {
				outcome = IntakeRepeat
				return nil
			}
		}
		registered, attrs := c.searchAttributes(ctx, s.Input.AlertID, warn)
		s.Input.SearchAttributes = registered
		s.Input.Summary = clip.String(s.Summary, 200)
		s.Input.Session = intakeSession(s.ID, s.Admitted)
		run, err := c.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: s.ID, TaskQueue: c.cfg.TaskQueue,
			WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			StaticSummary:            staticSummary(s.Summary),
			TypedSearchAttributes:    attrs,
			Memo:                     map[string]any{memoIdentity: s.Input.Intake.Identity, memoSeverity: s.Severity, memoSession: s.Input.Session},
		}, investigation.WorkflowName, s.Input)
		if err != nil {
			return err
		}
		outcome, runID, found = IntakeStarted, run.GetRunID(), false
		return nil
	})
	return outcome, runID, session, found, err
}

// ClosedOf returns which of the workflow IDs have no open run.
func (c *Client) ClosedOf(ctx context.Context, ids []string) ([]string, error) {
	var closed []string
	for _, id := range ids {
		err := c.call(ctx, func(ctx context.Context) error {
			d, err := c.tc.DescribeWorkflowExecution(ctx, id, "")
			switch {
			case IsNotFound(err):
				closed = append(closed, id)
			case err != nil:
				return err
			case d.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING:
				closed = append(closed, id)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return closed, nil
}

// printIntake writes the intake's part of an investigation's status: its
// identity, the alerts that arrived, and how each verdict's delivery went.
func printIntake(w io.Writer, in *investigation.IntakeStatus) {
	if in == nil {
		return
	}
	fmt.Fprintln(w)
	if in.Identity != "" {
		fmt.Fprintf(w, "Intake: alert identity %s\n", oneLine(in.Identity))
	}
	if in.Arrived > 0 {
		fmt.Fprintf(w, "Alerts that arrived since it began: %d", in.Arrived)
		if n := len(in.Arrivals); n < in.Arrived {
			fmt.Fprintf(w, " (the latest %d)", n)
		}
		fmt.Fprintln(w)
		for _, a := range in.Arrivals {
			fmt.Fprintf(w, "  - %s %s: %s\n", a.At.UTC().Format(time.TimeOnly), oneLine(a.Text()), oneLine(clip.String(a.Title, 80)))
		}
	}
	if len(in.Deliveries) > 0 {
		fmt.Fprintln(w, "Deliveries of the verdicts:")
		for _, d := range in.Deliveries {
			var parts []string
			if d.Slack != "" {
				parts = append(parts, "Slack "+d.Slack)
			}
			if d.Topic != "" {
				part := "results topic " + d.Topic
				if d.MessageID != "" {
					part += " (message " + d.MessageID + ")"
				}
				parts = append(parts, part)
			}
			if d.Pending {
				parts = append(parts, "in progress")
			}
			fmt.Fprintf(w, "  - %s (%s): %s\n", oneLine(d.Key), oneLine(d.Verdict), oneLine(strings.Join(parts, "; ")))
		}
	}
}
