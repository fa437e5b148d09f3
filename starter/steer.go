package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/investigation"
)

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
	var detach, asJSON bool
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
			return a.sendAndPrint(cmd, args[0], investigation.UpdateApprove, "approval", investigation.Approval{})
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
		Short: "Stop an investigation early and print the conclusion it draws from what it found so far",
		Long: `Stops an investigation: calls in flight are cut short (a model call in flight
finishes), its BigQuery sub-agents answer from what they have, each running
step answers from what it has without another model call, and the
investigation concludes at once. This prints the progress that follows the
stop and the conclusion (--json: as JSON lines, as starter watch --json
does); --detach only sends the stop. A stop while the investigation waits
for follow-up questions closes it.`,
		Args: idArgs("an investigation ID and optionally a reason", 0, 1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			reason := ""
			if len(args) > 1 {
				reason = strings.TrimSpace(args[1])
			}
			return a.stop(cmd, args[0], reason, detach, asJSON)
		},
	}
	stop.Flags().BoolVar(&detach, "detach", false, "send the stop and exit without following the conclusion")
	stop.Flags().BoolVar(&asJSON, "json", false, "print each new event, and the totals last, as one JSON line")
	ask := &cobra.Command{
		Use:   `ask ID "question"`,
		Short: "Ask an investigation a follow-up question and follow its answer live",
		Long: `Sends a follow-up question to an investigation (one that concluded and stays
open, or one still running: the question then waits for the current turn),
then shows the progress after the event that recorded it until the
answer's conclusion (--json: as JSON lines, as starter watch --json does).
Ctrl-C (exit code 130; SIGTERM: 143) stops following, not the
investigation, and prints the starter watch ID --from N command that resumes
after the last event shown.`,
		Args: idArgs("an investigation ID and the question", 1, 1, "the question is empty: type the follow-up question"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.ask(cmd, args[0], strings.TrimSpace(args[1]), detach, asJSON)
		},
	}
	ask.Flags().BoolVar(&detach, "detach", false, "send the question and exit without following the answer")
	ask.Flags().BoolVar(&asJSON, "json", false, "print each new event, and the totals last, as one JSON line")
	approveCall := &cobra.Command{
		Use:   `approve-call ID CALL_ID`,
		Short: "Approve an action the investigation waits on (a call of an MCP tool that acts); it runs at once",
		Long: `Approves one waiting action: a call of a tool that changes a system (an MCP
tool not marked read-only, or configured approval: required). starter status
and starter watch show the waiting ones with their CALL_ID, tool, arguments
and the step that asked.`,
		Args: idArgs("an investigation ID and the call ID of the action", 1, 1, "the call ID is empty: starter status ID lists the waiting actions"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.sendAndPrint(cmd, args[0], investigation.UpdateApproveCall, "approval",
				investigation.CallDecision{CallID: strings.TrimSpace(args[1])})
		},
	}
	denyCall := &cobra.Command{
		Use:   `deny-call ID CALL_ID ["reason"]`,
		Short: "Deny an action the investigation waits on; the model reads the denial and the reason",
		Args:  idArgs("an investigation ID, the call ID of the action and optionally a reason", 1, 2, "the call ID is empty: starter status ID lists the waiting actions"),
		RunE: func(cmd *cobra.Command, args []string) error {
			reason := ""
			if len(args) > 2 {
				reason = strings.TrimSpace(args[2])
			}
			return a.sendAndPrint(cmd, args[0], investigation.UpdateDenyCall, "denial",
				investigation.CallDecision{CallID: strings.TrimSpace(args[1]), Reason: reason})
		},
	}
	return []*cobra.Command{hint, approve, revise, answer, stop, ask, approveCall, denyCall}
}

// sendAndPrint sends one update and prints the investigation's confirmation.
func (a *app) sendAndPrint(cmd *cobra.Command, id, name, noun string, args ...any) error {
	c, err := a.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	ack, err := c.Steer(cmd.Context(), id, name, noun, args...)
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

// stop sends a stop, then follows the investigation from the event that
// recorded it until the conclusion it leads to.
func (a *app) stop(cmd *cobra.Command, id, reason string, detach, asJSON bool) error {
	return a.steerAndFollow(cmd, id, investigation.UpdateStop, "stop request", reason, detach, asJSON,
		func(ctx context.Context, c *agentclient.Client, r agentclient.Renderer, ack investigation.Ack) error {
			return c.FollowStop(ctx, r, id, ack)
		})
}

// ask sends a follow-up question, then follows the investigation from the
// event after the one that recorded it until that question's conclusion.
func (a *app) ask(cmd *cobra.Command, id, question string, detach, asJSON bool) error {
	return a.steerAndFollow(cmd, id, investigation.UpdateAsk, "question", question, detach, asJSON,
		func(ctx context.Context, c *agentclient.Client, r agentclient.Renderer, ack investigation.Ack) error {
			return c.FollowAnswer(ctx, r, id, question, ack)
		})
}

// steerAndFollow sends one input and prints the acknowledgement, then
// follows what comes of it, unless detach (which prints how to follow it).
func (a *app) steerAndFollow(cmd *cobra.Command, id, name, noun, arg string, detach, asJSON bool,
	follow func(context.Context, *agentclient.Client, agentclient.Renderer, investigation.Ack) error) error {
	ctx, out := cmd.Context(), info(cmd, asJSON)
	c, err := a.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	ack, err := c.Steer(ctx, id, name, noun, arg)
	if err != nil {
		return err
	}
	printAck(out, ack, noun)
	if detach {
		fmt.Fprintf(out, "Follow it with: starter watch %s --from %d\n", id, max(ack.Seq, 1))
		return nil
	}
	return follow(ctx, c, a.renderer(cmd, id, asJSON), ack)
}
