package tools

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/alerts"
)

type recordingStore struct {
	queries []alerts.Query
	found   []alerts.Alert
	err     error
}

func (s *recordingStore) Get(_ context.Context, id string) (alerts.Alert, error) {
	if id == "a1" {
		return alerts.Alert{ID: "a1", Data: map[string]any{"k": "v"}}, nil
	}
	return alerts.Alert{}, fmt.Errorf("alert %q: %w", id, alerts.ErrNotFound)
}

func (s *recordingStore) Search(_ context.Context, q alerts.Query) ([]alerts.Alert, error) {
	s.queries = append(s.queries, q)
	return s.found, s.err
}

func TestSearchAlertsArguments(t *testing.T) {
	cases := []struct {
		args  map[string]any
		value any
		err   string
	}{
		{args: map[string]any{"field": "type", "op": "==", "value": "x"}, value: "x"},
		{args: map[string]any{"field": "severity", "op": ">=", "value": "7.5", "value_type": "number"}, value: 7.5},
		{args: map[string]any{"field": "blocked", "op": "==", "value": "false", "value_type": "boolean"}, value: false},
		{args: map[string]any{"field": "ip", "op": "in", "value": `["198.51.100.23","203.0.113.7"]`, "value_type": "array"}, value: []any{"198.51.100.23", "203.0.113.7"}},
		{args: map[string]any{"field": "ip", "op": "in", "value": "a, b", "value_type": "array"}, value: []any{"a", "b"}},
		{args: map[string]any{"field": "x", "op": "==", "value": "abc", "value_type": "number"}, err: `value "abc" is not a number`},
		{args: map[string]any{"field": "id", "op": "==", "value": "9007199254740993", "value_type": "number"}, value: int64(9007199254740993)},
		{args: map[string]any{"field": "id", "op": "in", "value": `[9007199254740993, "x", 2.5]`, "value_type": "array"}, value: []any{int64(9007199254740993), "x", 2.5}},
		{args: map[string]any{"field": "x", "op": "in", "value": `[1, 2`, "value_type": "array"}, err: "value is not a JSON array"},
		{args: map[string]any{"field": "x", "op": "in", "value": `[{"a":1,"a":2}]`, "value_type": "array"}, err: "twice"},
		{args: map[string]any{"field": "x", "op": "==", "value": "NaN", "value_type": "number"}, err: `value "NaN" is not a finite number`},
		{args: map[string]any{"field": "x", "op": ">", "value": "+Inf", "value_type": "number"}, err: `value "+Inf" is not a finite number`},
		{args: map[string]any{"field": "x", "op": "<", "value": "-Inf", "value_type": "number"}, err: `value "-Inf" is not a finite number`},
		{args: map[string]any{"field": "x", "op": "==", "value": "1e999", "value_type": "number"}, err: `value "1e999" is not a finite number`},
		{args: map[string]any{"field": "x", "op": "==", "value": "123456789012345678901234", "value_type": "number"}, err: "search it with value_type string"},
		{args: map[string]any{"field": "x", "op": "==", "value": "1", "value_type": "date"}, err: "value_type must be"},
		{args: map[string]any{"op": "==", "value": "1"}, err: `missing required argument "field"`},
		{args: map[string]any{"field": "x", "op": "==", "value": "1", "limit": 2.5}, err: `"limit" must be a whole number`},
		{args: map[string]any{"field": "x", "op": "==", "value": 7.0}, err: `"value" must be a string`},
	}
	for _, c := range cases {
		s := &recordingStore{}
		_, err := NewSearchAlerts(s).Call(context.Background(), c.args)
		if c.err != "" {
			require.ErrorContains(t, err, c.err)
			require.True(t, IsRejection(err), "argument errors go back to the model")
			require.Empty(t, s.queries, "nothing reaches the store")
			continue
		}
		require.NoError(t, err)
		require.Equal(t, c.value, s.queries[0].Value)
		require.Equal(t, 10, s.queries[0].Limit)
	}
}

func TestSearchAlertsResult(t *testing.T) {
	s := &recordingStore{found: []alerts.Alert{{ID: "a", Source: "guardduty", Title: "t", Data: map[string]any{"big": strings.Repeat("x", 1000)}}, {ID: "b"}}}
	out, err := NewSearchAlerts(s).Call(context.Background(), map[string]any{"field": "type", "op": "==", "value": "x", "limit": 2.0, "offset": 4.0})
	require.NoError(t, err)
	list := out.(alertList)
	require.Equal(t, 2, list.Count)
	require.Equal(t, 6, list.NextOffset, "a full page says where the next one starts")
	require.Equal(t, "a", list.Alerts[0].ID)

	s.err = fmt.Errorf("bad field: %w", alerts.ErrInvalidQuery)
	_, err = NewSearchAlerts(s).Call(context.Background(), map[string]any{"field": "type", "op": "~", "value": "x"})
	require.True(t, IsRejection(err))
	s.err = fmt.Errorf("deadline exceeded")
	_, err = NewSearchAlerts(s).Call(context.Background(), map[string]any{"field": "type", "op": "==", "value": "x"})
	require.False(t, IsRejection(err), "store outages are retried, not handed to the model")
}

func TestGetAlert(t *testing.T) {
	s := &recordingStore{}
	_, err := NewGetAlert(s).Call(context.Background(), map[string]any{"id": "zz"})
	require.True(t, IsRejection(err))
	require.ErrorContains(t, err, `no alert with ID "zz"`)
	out, err := NewGetAlert(s).Call(context.Background(), map[string]any{"id": "a1"})
	require.NoError(t, err)
	require.Contains(t, fmt.Sprintf("%+v", out), "k:v")
}

func TestRegistry(t *testing.T) {
	s := &recordingStore{}
	_, err := NewRegistry(NewGetAlert(s), NewGetAlert(s))
	require.ErrorContains(t, err, "registered twice")
	r, err := NewRegistry(NewSearchAlerts(s), NewGetAlert(s))
	require.NoError(t, err)
	require.Equal(t, []string{"get_alert", "search_alerts"}, r.Names())
	require.Len(t, r.Declarations(nil), 2)
	require.Len(t, r.Declarations([]string{"search_alerts", "nope"}), 1)
	cat := r.Catalog()
	require.Contains(t, cat, "- `get_alert`: Read one stored alert")
	require.Contains(t, cat, "parameters: field, indicator, indicator_type, limit, offset, op, value, value_type")
	// Both return alerts' text, which a verdict weighs as the alert's own.
	require.True(t, r.ReturnsAlertText("get_alert"))
	require.True(t, r.ReturnsAlertText("search_alerts"))
	require.False(t, r.ReturnsAlertText("nope"))
	withAsk, err := NewRegistry(NewAskUser())
	require.NoError(t, err)
	require.False(t, withAsk.ReturnsAlertText("ask_user"))
}
