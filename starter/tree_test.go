package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/payloadcodec"
)

// historyClient answers describes and history reads of scripted workflows;
// every other client call panics (the embedded interface is nil).
type historyClient struct {
	client.Client
	wfs map[string]treeWorkflow
	// dc encodes the children's start input (default: the SDK's, in clear).
	dc converter.DataConverter
}

// treeWorkflow is a workflow whose runs (oldest first, the last one the
// latest) each started the children listed.
type treeWorkflow struct {
	typ    string
	status enums.WorkflowExecutionStatus
	runs   []treeRun
}

// child is a child workflow a run started, with its request.
type child struct {
	id, request string
}

type treeRun struct {
	id       string
	children []child
	gone     bool // its history is no longer kept
	// reset says a reset ended this run (terminated) and started the next
	// one, whose history begins with this run's start.
	reset bool
}

func (c *historyClient) Close() {}

func (c *historyClient) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	wf, ok := c.wfs[id]
	if !ok {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + id)
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Type:       &commonpb.WorkflowType{Name: wf.typ},
		Execution:  &commonpb.WorkflowExecution{WorkflowId: id, RunId: wf.runs[len(wf.runs)-1].id},
		FirstRunId: wf.runs[0].id,
		Status:     wf.status,
	}}, nil
}

// GetWorkflowHistory returns a run's child starts and, for a run that is not
// the latest, its continued-as-new close event (only that one when filter
// asks for close events).
func (c *historyClient) GetWorkflowHistory(_ context.Context, id, runID string, _ bool, filter enums.HistoryEventFilterType) client.HistoryEventIterator {
	runs := c.wfs[id].runs
	for i, r := range runs {
		if r.id != runID || r.gone {
			continue
		}
		var events []*historypb.HistoryEvent
		if filter != enums.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT {
			// The start names the run this one continued from: the last
			// one before it that no reset ended (a reset run begins with
			// its base run's start).
			from := ""
			for _, p := range runs[:i] {
				if !p.reset {
					from = p.id
				}
			}
			events = append(events, &historypb.HistoryEvent{Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
				WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{ContinuedExecutionRunId: from},
			}})
			for _, ch := range r.children {
				dc := c.dc
				if dc == nil {
					dc = converter.GetDefaultDataConverter()
				}
				input, err := dc.ToPayloads(map[string]string{"request": ch.request})
				if err != nil {
					panic(err)
				}
				events = append(events, &historypb.HistoryEvent{Attributes: &historypb.HistoryEvent_StartChildWorkflowExecutionInitiatedEventAttributes{
					StartChildWorkflowExecutionInitiatedEventAttributes: &historypb.StartChildWorkflowExecutionInitiatedEventAttributes{WorkflowId: ch.id, Input: input},
				}})
			}
		}
		if r.reset {
			events = append(events, &historypb.HistoryEvent{Attributes: &historypb.HistoryEvent_WorkflowExecutionTerminatedEventAttributes{
				WorkflowExecutionTerminatedEventAttributes: &historypb.WorkflowExecutionTerminatedEventAttributes{Reason: "reset", Identity: "history-resetter"},
			}})
		} else if i < len(runs)-1 {
			events = append(events, &historypb.HistoryEvent{Attributes: &historypb.HistoryEvent_WorkflowExecutionContinuedAsNewEventAttributes{
				WorkflowExecutionContinuedAsNewEventAttributes: &historypb.WorkflowExecutionContinuedAsNewEventAttributes{NewExecutionRunId: runs[i+1].id},
			}})
		}
		return &historyIterator{events: events}
	}
	return &historyIterator{err: serviceerror.NewNotFound("workflow run not found: " + runID)}
}

type historyIterator struct {
	events []*historypb.HistoryEvent
	err    error
}

func (it *historyIterator) HasNext() bool { return it.err != nil || len(it.events) > 0 }

func (it *historyIterator) Next() (*historypb.HistoryEvent, error) {
	if it.err != nil {
		return nil, it.err
	}
	e := it.events[0]
	it.events = it.events[1:]
	return e, nil
}

// treeClient holds the investigation "inv" with these runs; each child is a
// completed BigQuery sub-agent of one run, K and its number.
func treeClient(runs ...treeRun) *historyClient {
	c := &historyClient{wfs: map[string]treeWorkflow{"inv": {typ: investigation.WorkflowName, status: enums.WORKFLOW_EXECUTION_STATUS_RUNNING, runs: runs}}}
	for _, r := range runs {
		for _, ch := range r.children {
			c.wfs[ch.id] = treeWorkflow{typ: investigation.BigQueryWorkflowName, status: enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, runs: []treeRun{{id: "K" + strings.TrimPrefix(ch.id, "inv/bq-")}}}
		}
	}
	return c
}

func (c *historyClient) dial() (client.Client, error) { return c, nil }

// TestTree: the children of every run are listed, first run first; when
// the investigation continued as new, under the run that started them.
func TestTree(t *testing.T) {
	logins, ssh, vpn := child{id: "inv/bq-1", request: "logins of alice"}, child{id: "inv/bq-2", request: "ssh failures"}, child{id: "inv/bq-3", request: "VPN sessions"}
	for _, c := range []struct {
		name string
		runs []treeRun
		want string
	}{
		{"one run", []treeRun{{id: "R1", children: []child{logins}}}, `Investigation  inv  [Running]
   run R1
   http://localhost:8233/namespaces/default/workflows/inv
└─ BigQueryAgent  inv/bq-1  [Completed]
      request: logins of alice
      run K1
      http://localhost:8233/namespaces/default/workflows/inv/bq-1
`},
		{"continued as new", []treeRun{{id: "R1", children: []child{logins, ssh}}, {id: "R2"}, {id: "R3", children: []child{vpn}}}, `Investigation  inv  [Running]
   3 runs (continued as new), latest R3
   http://localhost:8233/namespaces/default/workflows/inv
├─ run 1 of 3: R1
│  ├─ BigQueryAgent  inv/bq-1  [Completed]
│  │     request: logins of alice
│  │     run K1
│  │     http://localhost:8233/namespaces/default/workflows/inv/bq-1
│  └─ BigQueryAgent  inv/bq-2  [Completed]
│        request: ssh failures
│        run K2
│        http://localhost:8233/namespaces/default/workflows/inv/bq-2
├─ run 2 of 3: R2
└─ run 3 of 3: R3
   └─ BigQueryAgent  inv/bq-3  [Completed]
         request: VPN sessions
         run K3
         http://localhost:8233/namespaces/default/workflows/inv/bq-3
`},
		// R2 was reset: R3 holds its history up to the reset point (bq-2)
		// and went on from there (bq-3); R2, terminated by the reset, is
		// left out.
		{"reset", []treeRun{{id: "R1", children: []child{logins}}, {id: "R2", reset: true, children: []child{ssh}}, {id: "R3", children: []child{ssh, vpn}}}, `Investigation  inv  [Running]
   2 runs (continued as new), latest R3
   http://localhost:8233/namespaces/default/workflows/inv
├─ run 1 of 2: R1
│  └─ BigQueryAgent  inv/bq-1  [Completed]
│        request: logins of alice
│        run K1
│        http://localhost:8233/namespaces/default/workflows/inv/bq-1
└─ run 2 of 2: R3
   ├─ BigQueryAgent  inv/bq-2  [Completed]
   │     request: ssh failures
   │     run K2
   │     http://localhost:8233/namespaces/default/workflows/inv/bq-2
   └─ BigQueryAgent  inv/bq-3  [Completed]
         request: VPN sessions
         run K3
         http://localhost:8233/namespaces/default/workflows/inv/bq-3
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := runCLI(t, treeClient(c.runs...).dial, "tree", "inv")
			require.NoError(t, err)
			require.Equal(t, c.want, out)
		})
	}
}

// TestTreeDecodesEncryptedRequests: with the payload key, a child's
// request reads from its encrypted start input; without it, it is left out.
func TestTreeDecodesEncryptedRequests(t *testing.T) {
	t.Setenv("PAYLOAD_KEY_FILE", "")
	keyFile := codecKeyFile(t)
	keys, err := payloadcodec.LoadKeyFile(keyFile)
	require.NoError(t, err)
	tc := treeClient(treeRun{id: "R1", children: []child{{id: "inv/bq-1", request: "logins of alice"}}})
	tc.dc = payloadcodec.NewDataConverter(keys, nil)
	p, err := tc.dc.ToPayload(map[string]string{"request": "logins of alice"})
	require.NoError(t, err)
	require.NotContains(t, string(p.GetData()), "alice", "the input is encrypted")

	out, err := runCLI(t, tc.dial, "tree", "inv", "--payload-key-file", keyFile)
	require.NoError(t, err)
	require.Contains(t, out, "└─ BigQueryAgent  inv/bq-1  [Completed]\n      request: logins of alice\n")
	out, err = runCLI(t, tc.dial, "tree", "inv")
	require.NoError(t, err)
	require.Contains(t, out, "└─ BigQueryAgent  inv/bq-1  [Completed]\n      run K1\n", "no request without the key")
}

func TestTreeErrors(t *testing.T) {
	dial := treeClient(treeRun{id: "R1", gone: true}, treeRun{id: "R2"}).dial
	_, err := runCLI(t, dial, "tree", "nope")
	require.EqualError(t, err, "no investigation with ID nope", "as every other command says it")
	_, err = runCLI(t, dial, "tree", "inv")
	require.EqualError(t, err, "find the runs of inv: workflow run not found: R1")
}
