package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/secops-agent/investigator/investigation"
)

// updateTimeout bounds how long a steering command waits for the
// investigation to confirm its input.
const updateTimeout = 30 * time.Second

// updater is what a steering command needs from the Temporal client.
type updater interface {
	UpdateWorkflow(ctx context.Context, options client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error)
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
}

// idArgs checks a command's arguments before anything touches the network:
// the investigation ID, then between min and max text arguments; a required
// text argument must not be blank (empty says why).
func idArgs(usage string, min, max int, empty string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < 1+min || len(args) > 1+max {
			return fmt.Errorf("%s takes %s: starter %s", cmd.Name(), usage, cmd.Use)
		}
		if strings.TrimSpace(args[0]) == "" {
			return errors.New("the investigation ID is empty: give the workflow ID that starter investigate printed")
		}
		if min > 0 && strings.TrimSpace(args[1]) == "" {
			return errors.New(empty)
		}
		return nil
	}
}

func (a *app) steerCommands() []*cobra.Command {
	var questionID string
	var detach bool
	hint := &cobra.Command{
		Use:     `hint ID "text"`,
		Short:   "Give a running investigation a hint, taken into account from its next model call",
		Example: `  starter hint investigation-guardduty-3f9a1c0d2b4e-20250101-120000.000 "198.51.100.23 is our own pentest box"`,
		Args:    idArgs("an investigation ID and the hint", 1, 1, "the hint is empty: say what the investigation should take into account"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.sendAndPrint(cmd, args[0], investigation.UpdateHint, "hint", strings.TrimSpace(args[1]))
		},
	}
	approve := &cobra.Command{
		Use:   "approve ID",
		Short: "Approve the plan of an investigation started with --approve-plan, so it runs",
		Args:  idArgs("an investigation ID", 0, 0, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.sendAndPrint(cmd, args[0], investigation.UpdateApprove, "approval")
		},
	}
	revise := &cobra.Command{
		Use:   `revise ID "what to change"`,
		Short: "Ask for a new plan instead of the one awaiting approval, saying what to change",
		Args:  idArgs("an investigation ID and what to change in the plan", 1, 1, "the revision is empty: say what to change in the plan"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.sendAndPrint(cmd, args[0], investigation.UpdateRevise, "revision request", strings.TrimSpace(args[1]))
		},
	}
	answer := &cobra.Command{
		Use:   `answer ID "text"`,
		Short: "Answer a question the investigation asked (the oldest pending one, or --question)",
		Args:  idArgs("an investigation ID and the answer", 1, 1, "the answer is empty: type the answer to the investigation's question"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.sendAndPrint(cmd, args[0], investigation.UpdateAnswer, "answer",
				investigation.Answer{QuestionID: strings.TrimSpace(questionID), Text: strings.TrimSpace(args[1])})
		},
	}
	answer.Flags().StringVar(&questionID, "question", "", "ID of the question to answer, e.g. q-1 (default: the oldest pending one)")
	stop := &cobra.Command{
		Use:   `stop ID ["reason"]`,
		Short: "Stop an investigation early: it concludes from what it found so far",
		Args:  idArgs("an investigation ID and optionally a reason", 0, 1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			reason := ""
			if len(args) > 1 {
				reason = strings.TrimSpace(args[1])
			}
			return a.sendAndPrint(cmd, args[0], investigation.UpdateStop, "stop request", reason)
		},
	}
	ask := &cobra.Command{
		Use:   `ask ID "question"`,
		Short: "Ask an investigation a follow-up question and follow its answer live",
		Long: `Sends a follow-up question to an investigation (one that concluded and stays
open, or one still running: the question then waits for the current turn),
then shows the progress from that point until the answer's conclusion.
Ctrl-C stops following, not the investigation, and prints the
starter watch ID --from N command that resumes after the last event shown.`,
		Args: idArgs("an investigation ID and the question", 1, 1, "the question is empty: type the follow-up question"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.ask(cmd, args[0], strings.TrimSpace(args[1]), detach)
		},
	}
	ask.Flags().BoolVar(&detach, "detach", false, "send the question and exit without following the answer")
	return []*cobra.Command{hint, approve, revise, answer, stop, ask}
}

// sendAndPrint sends one update and prints the investigation's confirmation.
func (a *app) sendAndPrint(cmd *cobra.Command, id, name, noun string, args ...any) error {
	c, err := a.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	ack, err := a.steer(cmd.Context(), c, id, name, noun, args...)
	if err != nil {
		return err
	}
	printAck(cmd.OutOrStdout(), ack, noun)
	return nil
}

func printAck(w io.Writer, ack investigation.Ack, noun string) {
	msg := strings.TrimSpace(ack.Message)
	if msg == "" {
		msg = fmt.Sprintf("%s recorded (event %d)", noun, ack.Seq)
	}
	fmt.Fprintln(w, msg)
}

// updateAttemptTimeout bounds one attempt of an update; a stuck attempt is
// retried under the same update ID until updateTimeout.
const updateAttemptTimeout = 8 * time.Second

// steer sends an update and waits until the investigation recorded it. Every
// attempt carries the same update ID, so the server records the input once
// however often it is retried (it admits only a few updates per workflow at
// a time, and a burst of them can leave one unconfirmed).
func (a *app) steer(ctx context.Context, c updater, id, name, noun string, args ...any) (investigation.Ack, error) {
	uctx, cancel := context.WithTimeout(ctx, updateTimeout)
	defer cancel()
	updateID := fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
	var ack investigation.Ack
	for {
		actx, acancel := context.WithTimeout(uctx, updateAttemptTimeout)
		h, err := c.UpdateWorkflow(actx, client.UpdateWorkflowOptions{
			UpdateID:     updateID,
			WorkflowID:   id,
			UpdateName:   name,
			Args:         args,
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(actx, &ack)
		}
		stuck := actx.Err() != nil && uctx.Err() == nil
		acancel()
		if err == nil {
			return ack, nil
		}
		code := status.Code(err)
		if !stuck && code != codes.ResourceExhausted && code != codes.Unavailable || uctx.Err() != nil {
			return ack, a.steerError(ctx, uctx, c, id, name, noun, err)
		}
		select {
		case <-uctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// steerError turns a failed update into one sentence.
func (a *app) steerError(ctx, uctx context.Context, c updater, id, name, noun string, err error) error {
	var timeout *client.WorkflowUpdateServiceTimeoutOrCanceledError
	var appErr *temporal.ApplicationError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted before investigation %s confirmed the %s (it may still take it)", id, noun)
	case uctx.Err() != nil || errors.As(err, &timeout):
		return fmt.Errorf("investigation %s did not confirm the %s within %s: is a worker running on task queue %q?", id, noun, updateTimeout, a.temporal.TaskQueue)
	case isNotFound(err):
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		d, derr := c.DescribeWorkflowExecution(dctx, id, "")
		if derr == nil {
			if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
				return fmt.Errorf("investigation %s has ended (%s) and takes no more input", id, statusWord(st))
			}
			return fmt.Errorf("investigation %s did not take the %s: %s", id, noun, err)
		}
		return fmt.Errorf("no investigation with ID %s", id)
	case errors.As(err, &appErr):
		msg := appErr.Message()
		if strings.Contains(msg, "unknown update") {
			return fmt.Errorf("investigation %s does not take %s updates: it runs an older version of the workflow", id, name)
		}
		return fmt.Errorf("investigation %s refused the %s: %s", id, noun, msg)
	}
	return fmt.Errorf("send the %s to investigation %s: %v", noun, id, err)
}

// statusWords name workflow statuses for people.
var statusWords = map[enums.WorkflowExecutionStatus]string{
	enums.WORKFLOW_EXECUTION_STATUS_RUNNING:          "running",
	enums.WORKFLOW_EXECUTION_STATUS_COMPLETED:        "completed",
	enums.WORKFLOW_EXECUTION_STATUS_FAILED:           "failed",
	enums.WORKFLOW_EXECUTION_STATUS_CANCELED:         "cancelled",
	enums.WORKFLOW_EXECUTION_STATUS_TERMINATED:       "terminated",
	enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW: "continued as new",
	enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:        "timed out",
	enums.WORKFLOW_EXECUTION_STATUS_PAUSED:           "paused",
}

// statusWord is a workflow status in lower case: "completed", "timed out".
func statusWord(st enums.WorkflowExecutionStatus) string {
	if w, ok := statusWords[st]; ok {
		return w
	}
	return strings.ToLower(st.String())
}

// ask sends a follow-up question, then follows the investigation from the
// event that recorded it until that question's conclusion.
func (a *app) ask(cmd *cobra.Command, id, question string, detach bool) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	c, err := a.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	ack, err := a.steer(ctx, c, id, investigation.UpdateAsk, "question", question)
	if err != nil {
		return err
	}
	printAck(out, ack, "question")
	if detach {
		fmt.Fprintf(out, "Follow it with: starter watch %s --from %d\n", id, max(ack.Seq, 1))
		return nil
	}
	fmt.Fprintln(out)
	return a.followTurn(ctx, temporalStream{c}, out, id, max(ack.Seq-1, 0), turnConclusion(question))
}

// turnConclusion is met by the conclusion of the turn that answers question:
// the first conclusion after the turn event that carries the question (turns
// run one after the other, so it is that turn's). Turns queued before the
// question, and their conclusions, are printed and followed past.
func turnConclusion(question string) func(investigation.Event) bool {
	q := strings.TrimSpace(question)
	matched := false
	return func(e investigation.Event) bool {
		switch {
		case !matched && e.Kind == investigation.EventTurn && strings.TrimSpace(e.Text) == q:
			matched = true
		case matched && e.Kind == investigation.EventConclusion:
			return true
		}
		return false
	}
}

// firstConclusion is met by the first conclusion printed.
func firstConclusion(e investigation.Event) bool { return e.Kind == investigation.EventConclusion }

// followTurn follows an investigation from event after+1 (starting at its
// latest run) until until is met, the investigation closes, or Ctrl-C.
// investigate and ask share it.
func (a *app) followTurn(ctx context.Context, src stream, out io.Writer, id string, after int, until func(investigation.Event) bool) error {
	f := a.newFollower(src, id, out)
	f.seq = after
	f.until = until
	if err := f.start(ctx, true); err != nil {
		return err
	}
	end, err := f.run(ctx)
	if err != nil {
		return err
	}
	switch end.how {
	case endInterrupted:
		f.stopped()
		return nil
	case endUntil:
		if st, err := src.status(ctx, id); err == nil {
			summary(out, st.Plan, st.ToolCalls, st.Usage)
			if st.Phase == investigation.PhaseIdle {
				f.p.idle()
			}
			return nil
		}
		// An investigation without the status query: the totals come
		// with its result once it completed.
		if d, err := src.describe(ctx, id, ""); err == nil && d.status == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			if res, err := src.outcome(ctx, id, d.runID); err == nil {
				summary(out, res.Plan, res.ToolCalls, res.Usage)
			}
		}
		return nil
	}
	if end.status != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		return closedLine(ctx, src, out, id, end)
	}
	res, err := src.outcome(ctx, id, end.runID)
	if err != nil {
		return fmt.Errorf("investigation %s failed: %s", id, failureMessage(err))
	}
	if !f.p.concluded && res.Conclusion != "" {
		f.p.conclusion(res.Conclusion, res.Verdict)
	}
	summary(out, res.Plan, res.ToolCalls, res.Usage)
	return nil
}
