package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/investigation"
)

// fakeClient answers updates and describes; every other client call panics
// (the embedded interface is nil), so a test fails loudly if it makes one.
type fakeClient struct {
	client.Client
	sent      []client.UpdateWorkflowOptions
	ack       investigation.Ack
	updateErr error // from UpdateWorkflow
	getErr    error // from the handle's Get
	described investigation.Status
	status    enums.WorkflowExecutionStatus
	descErr   error
}

func (c *fakeClient) Close() {}

func (c *fakeClient) UpdateWorkflow(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	c.sent = append(c.sent, o)
	if c.updateErr != nil {
		return nil, c.updateErr
	}
	return fakeHandle{c}, nil
}

func (c *fakeClient) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if c.descErr != nil {
		return nil, c.descErr
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: c.status}}, nil
}

type fakeHandle struct{ c *fakeClient }

func (h fakeHandle) WorkflowID() string { return "inv" }
func (h fakeHandle) RunID() string      { return "run" }
func (h fakeHandle) UpdateID() string   { return "u" }
func (h fakeHandle) Get(_ context.Context, v any) error {
	if h.c.getErr != nil {
		return h.c.getErr
	}
	*(v.(*investigation.Ack)) = h.c.ack
	return nil
}

// runCLI runs the starter with args against a dialer; it returns stdout and
// the error main would print.
func runCLI(t *testing.T, dial func() (client.Client, error), args ...string) (string, error) {
	t.Helper()
	a := testApp()
	a.dialer = dial
	var out strings.Builder
	root := newRootApp(a, &out)
	root.SetArgs(args)
	root.SetErr(&strings.Builder{})
	err := root.ExecuteContext(testCtx(t))
	return out.String(), err
}

// TestArgumentsAreCheckedBeforeAnyNetworkCall: bad arguments are one clear
// sentence and Temporal is never dialed.
func TestArgumentsAreCheckedBeforeAnyNetworkCall(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"hint", "inv", ""}, "the hint is empty: say what the investigation should take into account"},
		{[]string{"hint", "inv", "   "}, "the hint is empty: say what the investigation should take into account"},
		{[]string{"hint", "inv"}, `hint takes an investigation ID and the hint: starter hint ID "text"`},
		{[]string{"hint", "", "x"}, "the investigation ID is empty: give the workflow ID that starter investigate printed"},
		{[]string{"revise", "inv", ""}, "the revision is empty: say what to change in the plan"},
		{[]string{"answer", "inv", "\t", "--question", "q-1"}, "the answer is empty: type the answer to the investigation's question"},
		{[]string{"ask", "inv", ""}, "the question is empty: type the follow-up question"},
		{[]string{"approve"}, "approve takes an investigation ID: starter approve ID"},
		{[]string{"approve", "inv", "extra"}, "approve takes an investigation ID: starter approve ID"},
		{[]string{"stop", "inv", "a", "b"}, `stop takes an investigation ID and optionally a reason: starter stop ID ["reason"]`},
		{[]string{"status"}, "status takes an investigation ID: starter status ID"},
		{[]string{"watch", "inv", "--from", "0"}, "--from must be 1 or more (the first event is 1), not 0"},
		{[]string{"investigate", "--alert", "missing.json", "--max-tool-calls", "0"}, "--max-tool-calls must be between 1 and 1000, not 0"},
		{[]string{"investigate", "--alert", "missing.json", "--max-tool-calls", "100000"}, "--max-tool-calls must be between 1 and 1000, not 100000"},
		{[]string{"investigate", "--alert", "missing.json", "--max-steps", "65"}, "--max-steps must be between 1 and 64, not 65"},
		{[]string{"investigate", "--alert", "missing.json", "--max-iterations", "51"}, "--max-iterations must be between 1 and 50, not 51"},
		{[]string{"investigate", "--alert", "missing.json", "--max-parallel-steps", "17"}, "--max-parallel-steps must be between 1 and 16, not 17"},
		{[]string{"investigate", "--alert", "missing.json", "--time-budget", "0s"}, "--time-budget must be positive and at most 24h0m0s, not 0s"},
		{[]string{"investigate", "--alert", "missing.json", "--time-budget", "25h"}, "--time-budget must be positive and at most 24h0m0s, not 25h"},
		{[]string{"investigate", "--alert", "missing.json", "--idle-timeout", "-1m"}, "--idle-timeout must be positive, not -1m0s"},
		{[]string{"investigate", "--alert", "missing.json", "--max-history-events", "49"}, "--max-history-events must be at least 50 (a run needs room for a whole turn before it continues as new), not 49"},
		{[]string{"investigate", "--alert", "missing.json", "--max-history-events", "0"}, "--max-history-events must be at least 50 (a run needs room for a whole turn before it continues as new), not 0"},
		{[]string{"investigate", "--alert", ""}, "the --alert path is empty: give the alert JSON file, or - for standard input"},
		{[]string{"investigate", "--alert-id", " "}, "the --alert-id is empty: give the ID of an imported alert (starter alert list)"},
		{[]string{"tree", ""}, "the investigation ID is empty: give the workflow ID that starter investigate printed"},
		{[]string{"tree"}, "tree takes a workflow ID: starter tree WORKFLOW_ID"},
		{[]string{"status", "inv", "--log-level", "bogus"}, `--log-level: unknown log level "bogus" (use debug, info, warn or error)`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			dialed := false
			_, err := runCLI(t, func() (client.Client, error) { dialed = true; return nil, errors.New("no network in this test") }, c.args...)
			require.EqualError(t, err, c.want)
			require.False(t, dialed, "Temporal was dialed")
		})
	}
}

// TestBadFlagValueIsOneSentence: a flag value that does not parse names
// the flag and the form it takes, in every command, not the parser's
// error (`strconv.ParseInt: parsing "abc": invalid syntax`).
func TestBadFlagValueIsOneSentence(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"watch", "inv", "--from", "abc"}, `--from takes a whole number, not "abc"`},
		{[]string{"watch", "inv", "--from", "99999999999999999999"}, `--from takes a whole number, and "99999999999999999999" is out of range`},
		{[]string{"investigate", "--alert", "a.json", "--time-budget", "fast"}, `--time-budget takes a duration such as 30s or 3m, not "fast"`},
		{[]string{"investigate", "--alert", "a.json", "--max-scan-bytes", "10XB"}, `--max-scan-bytes: "10XB" is not a byte count: write a whole number with an optional unit, like 10GiB or 500MiB`},
		{[]string{"intake", "--daily-budget-usd", "lots"}, `--daily-budget-usd takes a number, not "lots"`},
		{[]string{"intake", "--max-running"}, "--max-running needs a value: a whole number"},
		{[]string{"intake", "status", "--json=maybe"}, `--json takes true or false, not "maybe"`},
		{[]string{"status", "inv", "--call-timeout", "5"}, `--call-timeout takes a duration such as 30s or 3m, not "5"`},
		{[]string{"eval", "--bogus"}, "unknown flag: --bogus"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := runCLI(t, noTemporal, c.args...)
			require.EqualError(t, err, c.want)
		})
	}
}

// TestLowestMaxHistoryEvents: the lowest continue-as-new threshold passes
// the checks (the missing alert file is the next thing to fail).
func TestLowestMaxHistoryEvents(t *testing.T) {
	_, err := runCLI(t, noTemporal, "investigate", "--alert", "missing.json", "--max-history-events", strconv.Itoa(investigation.MinMaxHistoryEvents))
	require.ErrorContains(t, err, "missing.json")
	require.NotContains(t, err.Error(), "--max-history-events")
}

func TestSteeringCommandsSendTheirUpdate(t *testing.T) {
	for _, c := range []struct {
		args     []string
		name     string
		arg      []any
		ack      investigation.Ack
		wantLine string
	}{
		{[]string{"hint", "inv", " our scanner "}, investigation.UpdateHint, []any{"our scanner"},
			investigation.Ack{Seq: 42, Message: "hint recorded (event 42): taken into account from the next model call"},
			"hint recorded (event 42): taken into account from the next model call\n"},
		// One argument, so that under a key file it is encrypted: an approve
		// that carries no payload is refused (design/security.md).
		{[]string{"approve", "inv"}, investigation.UpdateApprove, []any{investigation.Approval{}},
			investigation.Ack{Seq: 7, Message: "plan approved: the investigation runs it now"}, "plan approved: the investigation runs it now\n"},
		{[]string{"revise", "inv", "use the VPN logs"}, investigation.UpdateRevise, []any{"use the VPN logs"},
			investigation.Ack{Seq: 8}, "revision request recorded (event 8)\n"},
		{[]string{"answer", "inv", "yes, a test box", "--question", "q-2"}, investigation.UpdateAnswer, []any{investigation.Answer{QuestionID: "q-2", Text: "yes, a test box"}},
			investigation.Ack{Seq: 9, Message: "answer to q-2 recorded"}, "answer to q-2 recorded\n"},
		{[]string{"answer", "inv", "yes"}, investigation.UpdateAnswer, []any{investigation.Answer{Text: "yes"}},
			investigation.Ack{Seq: 9, Message: "answer to q-1 recorded"}, "answer to q-1 recorded\n"},
		{[]string{"stop", "inv", "--detach"}, investigation.UpdateStop, []any{""},
			investigation.Ack{Seq: 10, Message: "stop recorded"}, "stop recorded\nFollow it with: starter watch inv --from 10\n"},
		{[]string{"stop", "inv", "enough evidence", "--detach"}, investigation.UpdateStop, []any{"enough evidence"},
			investigation.Ack{Seq: 10, Message: "stop recorded"}, "stop recorded\nFollow it with: starter watch inv --from 10\n"},
		{[]string{"ask", "inv", "And host-8?", "--detach"}, investigation.UpdateAsk, []any{"And host-8?"},
			investigation.Ack{Seq: 12, Message: "question recorded: a new turn starts now"},
			"question recorded: a new turn starts now\nFollow it with: starter watch inv --from 12\n"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			fc := &fakeClient{ack: c.ack}
			out, err := runCLI(t, func() (client.Client, error) { return fc, nil }, c.args...)
			require.NoError(t, err)
			require.Equal(t, c.wantLine, out)
			require.Len(t, fc.sent, 1)
			require.Equal(t, "inv", fc.sent[0].WorkflowID)
			require.Equal(t, c.name, fc.sent[0].UpdateName)
			require.Equal(t, c.arg, fc.sent[0].Args)
			require.Equal(t, client.WorkflowUpdateStageCompleted, fc.sent[0].WaitForStage)
		})
	}
}

func TestSteeringErrors(t *testing.T) {
	notFound := serviceerror.NewNotFound("workflow execution already completed")
	for _, c := range []struct {
		name string
		fc   *fakeClient
		want string
	}{
		{"rejected by the validator", &fakeClient{getErr: temporal.NewApplicationError("the plan is not waiting for approval (the investigation is executing)", "Error")},
			"investigation inv refused the hint: the plan is not waiting for approval (the investigation is executing)"},
		{"no such workflow", &fakeClient{updateErr: serviceerror.NewNotFound("workflow not found"), descErr: serviceerror.NewNotFound("workflow not found")},
			"no investigation with ID inv"},
		{"closed workflow", &fakeClient{updateErr: notFound, status: enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT},
			"investigation inv has ended (timed out) and takes no more input"},
		{"older workflow", &fakeClient{getErr: temporal.NewApplicationError("unknown update hint. KnownUpdates=[]", "Error")},
			"investigation inv does not take hint updates: it runs an older version of the workflow"},
		{"no worker", &fakeClient{updateErr: client.NewWorkflowUpdateServiceTimeoutOrCanceledError(context.DeadlineExceeded)},
			`investigation inv did not confirm the hint within 30s: is a worker running on task queue "investigations"?`},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := runCLI(t, func() (client.Client, error) { return c.fc, nil }, "hint", "inv", "text")
			require.EqualError(t, err, c.want)
			require.Empty(t, out)
		})
	}
}
