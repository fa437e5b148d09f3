package agentclient

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"github.com/secops-agent/investigator/intake"
	"github.com/secops-agent/investigator/investigation"
)

// notReady is what the server answers an update whose workflow task failed
// (UnhandledCommand: new events came in as the task closed the run).
var notReady = serviceerror.NewWorkflowNotReady("Unable to perform workflow execution update due to unexpected workflow task failure.")

// TestSteerSendsAgainAfterAFailedWorkflowTask: a stop sent as a cancelled
// activity reports is taken on the next attempt, under the same update ID;
// a task that keeps failing is reported after a few attempts.
func TestSteerSendsAgainAfterAFailedWorkflowTask(t *testing.T) {
	tcl := mocks.NewClient(t)
	var ids []string
	handle := mocks.NewWorkflowUpdateHandle(t)
	handle.On("Get", mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		*args.Get(1).(*investigation.Ack) = investigation.Ack{Seq: 7}
	}).Return(nil)
	record := func(args mock.Arguments) { ids = append(ids, args.Get(1).(client.UpdateWorkflowOptions).UpdateID) }
	tcl.On("UpdateWorkflow", mock.Anything, mock.Anything).Run(record).Return(nil, notReady).Twice()
	tcl.On("UpdateWorkflow", mock.Anything, mock.Anything).Run(record).Return(handle, nil).Once()
	c, err := New(tcl, Options{})
	require.NoError(t, err)
	ack, err := c.Steer(context.Background(), "inv", investigation.UpdateStop, "stop request", "enough")
	require.NoError(t, err)
	require.Equal(t, 7, ack.Seq)
	require.Len(t, ids, 3)
	require.Equal(t, ids[0], ids[2], "every attempt is the same update")

	tcl = mocks.NewClient(t)
	tcl.On("UpdateWorkflow", mock.Anything, mock.Anything).Return(nil, notReady)
	c, err = New(tcl, Options{})
	require.NoError(t, err)
	_, err = c.Steer(context.Background(), "inv", investigation.UpdateStop, "stop request", "enough")
	require.ErrorContains(t, err, "send the stop request to investigation inv: Unable to perform workflow execution update due to unexpected workflow task failure.")
	tcl.AssertNumberOfCalls(t, "UpdateWorkflow", maxTaskFailures+1)
}

// TestReleaseSendsAgainAfterAFailedWorkflowTask: a release whose workflow
// task failed is sent again under the same update ID; one to an intake
// that never ran is not retried.
func TestReleaseSendsAgainAfterAFailedWorkflowTask(t *testing.T) {
	tcl := mocks.NewClient(t)
	var ids []string
	handle := mocks.NewWorkflowUpdateHandle(t)
	handle.On("Get", mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		*args.Get(1).(*intake.Released) = intake.Released{WorkflowIDs: []string{"investigation-a"}}
	}).Return(nil)
	record := func(args mock.Arguments) { ids = append(ids, args.Get(1).(client.UpdateWorkflowOptions).UpdateID) }
	tcl.On("UpdateWorkflow", mock.Anything, mock.Anything).Run(record).Return(nil, notReady).Twice()
	tcl.On("UpdateWorkflow", mock.Anything, mock.Anything).Run(record).Return(handle, nil).Once()
	c, err := New(tcl, Options{})
	require.NoError(t, err)
	out, err := c.Release(context.Background(), intake.Release{All: true})
	require.NoError(t, err)
	require.Equal(t, []string{"investigation-a"}, out.WorkflowIDs)
	require.Len(t, ids, 3)
	require.NotEmpty(t, ids[0])
	require.Equal(t, ids[0], ids[2], "every attempt is the same update")

	tcl = mocks.NewClient(t)
	tcl.On("UpdateWorkflow", mock.Anything, mock.Anything).Return(nil, serviceerror.NewNotFound("workflow not found"))
	c, err = New(tcl, Options{})
	require.NoError(t, err)
	_, err = c.Release(context.Background(), intake.Release{All: true})
	require.ErrorContains(t, err, "no intake has run on task queue")
	tcl.AssertNumberOfCalls(t, "UpdateWorkflow", 1)
}
