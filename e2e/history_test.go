package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
)

// activityEntry is one activity of a history as the Web UI lists it: an
// activity (its scheduled event) or a local activity (its marker).
type activityEntry struct {
	Type, Summary string
	// Queue is an activity's task queue ("" for a local activity).
	Queue string
	Local bool
}

// activitiesIn lists a history's activities and local activities in order,
// their summaries decoded with dc, leaving out the workflow's own writes of
// its context and progress (storeWrites counts those).
func activitiesIn(t *testing.T, hist *historypb.History, dc converter.DataConverter) []activityEntry {
	t.Helper()
	var out []activityEntry
	for _, e := range hist.Events {
		var a activityEntry
		switch {
		case e.GetActivityTaskScheduledEventAttributes() != nil:
			a.Type = e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
			a.Queue = e.GetActivityTaskScheduledEventAttributes().GetTaskQueue().GetName()
		case e.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity":
			var data struct{ ActivityType string }
			require.NoError(t, dc.FromPayloads(e.GetMarkerRecordedEventAttributes().GetDetails()["data"], &data))
			a.Type, a.Local = data.ActivityType, true
			if a.Type == "StoreContext" || a.Type == "StoreProgress" {
				continue
			}
		default:
			continue
		}
		require.NoError(t, dc.FromPayload(e.GetUserMetadata().GetSummary(), &a.Summary))
		out = append(out, a)
	}
	return out
}

// storeWrites counts the workflow's own writes of its context and progress
// (local activities) by type.
func storeWrites(t *testing.T, hist *historypb.History) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, e := range hist.Events {
		if e.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" {
			var data struct{ ActivityType string }
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(e.GetMarkerRecordedEventAttributes().GetDetails()["data"], &data))
			if data.ActivityType == "StoreContext" || data.ActivityType == "StoreProgress" {
				n[data.ActivityType]++
			}
		}
	}
	return n
}

// names lists the entries' types, a local activity's marked "(local)".
func names(acts []activityEntry) []string {
	out := make([]string, len(acts))
	for i, a := range acts {
		out[i] = a.Type
		if a.Local {
			out[i] += " (local)"
		}
	}
	return out
}

func summaries(acts []activityEntry) []string {
	out := make([]string, len(acts))
	for i, a := range acts {
		out[i] = a.Summary
	}
	return out
}
