package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/toolcall"
)

// alertStore is what the alert tools need from the Firestore alert store.
type alertStore interface {
	Get(ctx context.Context, id string) (alerts.Alert, error)
	Search(ctx context.Context, q alerts.Query) ([]alerts.Alert, error)
}

// NewSearchAlerts returns the search_alerts tool.
func NewSearchAlerts(store alertStore) Tool { return searchAlerts{store} }

// NewGetAlert returns the get_alert tool.
func NewGetAlert(store alertStore) Tool { return getAlert{store} }

type searchAlerts struct{ store alertStore }

// Quick: one store read.
func (searchAlerts) Quick() {}

func (searchAlerts) Purpose() string {
	return "Find past alerts in the alert store by one field condition (same IP, instance, type, ...), to see history and recurrence."
}

func (searchAlerts) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name: toolcall.SearchAlerts,
		Description: "Search past security alerts stored in Firestore by one field condition. " +
			"Returns {count, alerts:[{id, source, type, severity, title, observed_at}], next_offset} " +
			"(next_offset only when more may exist); use get_alert for an alert's full data. " +
			"Example: field \"service.action.networkConnectionAction.remoteIpDetails.ipAddressV4\", op \"==\", value \"198.51.100.23\".",
		Parameters: &genai.Schema{
			Type: genai.TypeObject,
			Properties: map[string]*genai.Schema{
				"field": {Type: genai.TypeString, Description: "Dotted path under the alert's original JSON, e.g. \"type\", \"resource.instanceDetails.instanceId\", \"finding.category\". " +
					"Prefix with @ for the normalised fields every alert has: @source (guardduty|scc|edr|generic), @type, @severity (low|medium|high|critical), @title."},
				"op":         {Type: genai.TypeString, Enum: alerts.Operators, Description: "Firestore comparison operator."},
				"value":      {Type: genai.TypeString, Description: "The value to compare with, as text: \"198.51.100.23\", \"7.5\", \"true\", or for array values a JSON array such as [\"a\",\"b\"]."},
				"value_type": {Type: genai.TypeString, Enum: []string{"string", "number", "boolean", "array"}, Description: "How to read value. Default string; use array with in, not-in and array-contains-any."},
				"limit":      {Type: genai.TypeInteger, Description: "Most alerts to return, 1-100, default 10."},
				"offset":     {Type: genai.TypeInteger, Description: "Alerts to skip, for paging; default 0."},
			},
			Required: []string{"field", "op", "value"},
		},
	}
}

func (t searchAlerts) Call(ctx context.Context, args map[string]any) (any, error) {
	field, err := StringArg(args, "field", true, 0)
	if err != nil {
		return nil, err
	}
	op, err := StringArg(args, "op", true, 0)
	if err != nil {
		return nil, err
	}
	raw, err := StringArg(args, "value", false, 0)
	if err != nil {
		return nil, err
	}
	vt, err := StringArg(args, "value_type", false, 0)
	if err != nil {
		return nil, err
	}
	value, err := typedValue(raw, vt)
	if err != nil {
		return nil, err
	}
	limit, err := IntArg(args, "limit", 10, 1, 100)
	if err != nil {
		return nil, err
	}
	offset, err := IntArg(args, "offset", 0, 0, 10000)
	if err != nil {
		return nil, err
	}
	found, err := t.store.Search(ctx, alerts.Query{Field: field, Op: op, Value: value, Limit: limit, Offset: offset})
	if err != nil {
		if errors.Is(err, alerts.ErrInvalidQuery) {
			return nil, Reject("%v", err)
		}
		return nil, err
	}
	out := alertList{Count: len(found), Alerts: make([]alertSummary, 0, len(found))}
	for _, a := range found {
		out.Alerts = append(out.Alerts, summarize(a))
	}
	if len(found) == limit {
		out.NextOffset = offset + limit
	}
	return out, nil
}

// typedValue reads the textual value as the given type.
func typedValue(raw, valueType string) (any, error) {
	switch valueType {
	case "", "string":
		return raw, nil
	case "number":
		n, err := alerts.ParseNumber(raw)
		switch {
		case errors.Is(err, alerts.ErrNotFinite):
			return nil, Reject("value %q is not a finite number; no alert holds NaN or an infinity", raw)
		case errors.Is(err, alerts.ErrInexact):
			return nil, Reject("value %q has more digits than a number keeps; alerts store such numbers as text, so search it with value_type string", raw)
		case err != nil:
			return nil, Reject("value %q is not a number", raw)
		}
		return n, nil
	case "boolean":
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return nil, Reject("value %q is not true or false", raw)
		}
		return b, nil
	case "array":
		var arr []any
		if strings.HasPrefix(strings.TrimSpace(raw), "[") {
			// Decoded as alerts are, so a long integer ID in the list keeps
			// every digit.
			var probe []json.RawMessage
			if err := json.Unmarshal([]byte(raw), &probe); err != nil {
				return nil, Reject("value is not a JSON array: %v", err)
			}
			v, err := alerts.DecodeJSON([]byte(raw))
			if err != nil {
				return nil, Reject("value is not a JSON array: %v", err)
			}
			arr = v.([]any)
		} else {
			for _, p := range strings.Split(raw, ",") {
				arr = append(arr, strings.TrimSpace(p))
			}
		}
		if len(arr) == 0 || len(arr) > 30 {
			return nil, Reject("an array value needs 1 to 30 elements, got %d", len(arr))
		}
		return arr, nil
	}
	return nil, Reject("value_type must be string, number, boolean or array, got %q", valueType)
}

type alertList struct {
	Count      int            `json:"count"`
	Alerts     []alertSummary `json:"alerts"`
	NextOffset int            `json:"next_offset,omitempty"`
}

type alertSummary struct {
	ID         string `json:"id"`
	Source     string `json:"source"`
	Type       string `json:"type"`
	Severity   string `json:"severity"`
	Title      string `json:"title"`
	ObservedAt string `json:"observed_at,omitempty"`
}

func summarize(a alerts.Alert) alertSummary {
	s := alertSummary{ID: a.ID, Source: a.Source, Type: a.Type, Severity: a.Severity, Title: a.Title}
	if !a.ObservedAt.IsZero() {
		s.ObservedAt = a.ObservedAt.UTC().Format(time.RFC3339)
	}
	return s
}

type getAlert struct{ store alertStore }

// Quick: one store read.
func (getAlert) Quick() {}

func (getAlert) Purpose() string {
	return "Read one stored alert's full original data by its ID (the investigated alert or a past one)."
}

func (getAlert) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name: toolcall.GetAlert,
		Description: "Fetch one stored alert by ID with its full original JSON. " +
			"Returns {id, source, type, severity, title, observed_at, data}. Example: id \"guardduty-3f9a1c0d2b4e\".",
		Parameters: &genai.Schema{
			Type:       genai.TypeObject,
			Properties: map[string]*genai.Schema{"id": {Type: genai.TypeString, Description: "The alert ID, as returned by search_alerts."}},
			Required:   []string{"id"},
		},
	}
}

func (t getAlert) Call(ctx context.Context, args map[string]any) (any, error) {
	id, err := StringArg(args, "id", true, 0)
	if err != nil {
		return nil, err
	}
	a, err := t.store.Get(ctx, id)
	if errors.Is(err, alerts.ErrNotFound) {
		return nil, Reject("no alert with ID %q", id)
	}
	if err != nil {
		return nil, err
	}
	return struct {
		alertSummary
		Data map[string]any `json:"data"`
	}{summarize(a), a.Data}, nil
}
