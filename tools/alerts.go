package tools

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
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

// NewGetAlert returns the get_alert tool, reading through r (the worker
// gives its alert cache, which the model phases have filled with the
// investigation's alert, so the call needs no store round trip).
func NewGetAlert(r alerts.Getter) Tool { return getAlert{r} }

// Longest arguments the alert tools accept, in bytes: far above any real
// value, and a model (or an alert that steers it) cannot send megabytes to
// the store or into a summary.
const (
	maxIDArg    = 200
	maxFieldArg = 1024 // a field path
	maxValueArg = 4096 // a value, or a JSON array of up to 30 of them
	maxEnumArg  = 32   // op, value_type, indicator_type
)

type searchAlerts struct{ store alertStore }

// Quick: one store read.
func (searchAlerts) Quick() {}

// AlertText: the alerts it lists carry their titles, which the alerts' senders wrote.
func (searchAlerts) AlertText() bool { return true }

func (searchAlerts) Purpose() string {
	return "Find past alerts that share an indicator (IP, domain, hash, user, e-mail, cloud resource) whatever their source and layout, or by one field condition, to see history and recurrence."
}

func (searchAlerts) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name: toolcall.SearchAlerts,
		Description: "Search past security alerts stored in Firestore, in one of two ways. " +
			"By indicator: give indicator (and optionally indicator_type) to find every alert that holds it anywhere, " +
			"whatever its source (GuardDuty, SCC, EDR, WAF, SIEM) and the field that holds it; values are compared normalised " +
			"(addresses canonical, names and hashes in any case, CORP\\alice also as alice), and an IPv4 address also finds alerts " +
			"that show it anonymised (XXX.XXX.7.82) as partial matches. " +
			"By field: give field, op and value for one condition on the alert's original JSON. " +
			"Returns {count, alerts:[{id, source, type, severity, title, observed_at, matched, partial}], next_offset} " +
			"(matched and partial for indicator searches; next_offset only when more may exist); use get_alert for an alert's data. " +
			"Examples: indicator \"198.51.100.23\"; field \"service.action.networkConnectionAction.remoteIpDetails.ipAddressV4\", op \"==\", value \"198.51.100.23\".",
		Parameters: &genai.Schema{
			Type: genai.TypeObject,
			Properties: map[string]*genai.Schema{
				"indicator": {Type: genai.TypeString, Description: "An indicator to find in any alert: an IP, domain or host name, MD5/SHA-1/SHA-256 hash, user, e-mail address, cloud resource (ARN, GCP or Azure name, i-0abc...), or an anonymised IPv4 such as XXX.XXX.7.82."},
				"indicator_type": {Type: genai.TypeString, Enum: alerts.KeyTypes, Description: "What the indicator is; guessed from its shape when left out " +
					"(give domain for a host name without a dot, user for a name that looks like a domain)."},
				"field": {Type: genai.TypeString, Description: "Dotted path under the alert's original JSON, e.g. \"type\", \"resource.instanceDetails.instanceId\", \"finding.category\". " +
					"Prefix with @ for the normalised fields every alert has: @source (guardduty|scc|edr|generic), @type, @severity (low|medium|high|critical), @title."},
				"op":         {Type: genai.TypeString, Enum: alerts.Operators, Description: "Firestore comparison operator, with field."},
				"value":      {Type: genai.TypeString, Description: "The value to compare field with, as text: \"198.51.100.23\", \"7.5\", \"true\", or for array values a JSON array such as [\"a\",\"b\"]."},
				"value_type": {Type: genai.TypeString, Enum: []string{"string", "number", "boolean", "array"}, Description: "How to read value. Default string; use array with in, not-in and array-contains-any."},
				"limit":      {Type: genai.TypeInteger, Description: "Most alerts to return, 1-100, default 10."},
				"offset":     {Type: genai.TypeInteger, Description: "Alerts to skip, for paging; default 0."},
			},
		},
	}
}

func (t searchAlerts) Call(ctx context.Context, args map[string]any) (any, error) {
	limit, err := IntArg(args, "limit", 10, 1, 100)
	if err != nil {
		return nil, err
	}
	offset, err := IntArg(args, "offset", 0, 0, 10000)
	if err != nil {
		return nil, err
	}
	q, ind, err := searchQuery(args)
	if err != nil {
		return nil, err
	}
	q.Limit, q.Offset = limit, offset
	found, err := t.store.Search(ctx, q)
	if err != nil {
		if errors.Is(err, alerts.ErrInvalidQuery) {
			return nil, Reject("%v", err)
		}
		return nil, err
	}
	out := alertList{Count: len(found), Alerts: make([]alertSummary, 0, len(found)), Indicator: ind}
	for _, a := range found {
		s := summarize(a)
		if ind != nil {
			s.Matched, s.Partial = matched(a.Indicators, q.Indicators)
		}
		out.Alerts = append(out.Alerts, s)
	}
	if len(found) == limit {
		out.NextOffset = offset + limit
	}
	return out, nil
}

// searchQuery reads the arguments of one of the two kinds of search.
func searchQuery(args map[string]any) (alerts.Query, *searched, error) {
	value, err := StringArg(args, "indicator", false, alerts.MaxIndicatorBytes)
	if err != nil {
		return alerts.Query{}, nil, err
	}
	typ, err := StringArg(args, "indicator_type", false, maxEnumArg)
	if err != nil {
		return alerts.Query{}, nil, err
	}
	if value != "" {
		for _, other := range []string{"field", "op", "value", "value_type"} {
			if v, ok := args[other]; ok && v != nil && v != "" {
				return alerts.Query{}, nil, Reject("give either indicator or field, op and value, not both (%q was given with indicator)", other)
			}
		}
		keys, err := alerts.SearchKeys(typ, value)
		if err != nil {
			return alerts.Query{}, nil, Reject("%v", err)
		}
		if typ == "" {
			typ = strings.SplitN(keys[0], ":", 2)[0]
		}
		return alerts.Query{Indicators: keys}, &searched{Type: typ, Value: value}, nil
	}
	if typ != "" {
		return alerts.Query{}, nil, Reject("indicator_type was given without indicator")
	}
	field, err := StringArg(args, "field", false, maxFieldArg)
	if err != nil {
		return alerts.Query{}, nil, err
	}
	if field == "" {
		if args["op"] != nil || args["value"] != nil {
			return alerts.Query{}, nil, Reject("missing required argument %q", "field")
		}
		return alerts.Query{}, nil, Reject("give indicator (an IP, domain, hash, user...) or field, op and value")
	}
	op, err := StringArg(args, "op", true, maxEnumArg)
	if err != nil {
		return alerts.Query{}, nil, err
	}
	if _, ok := args["value"]; !ok {
		return alerts.Query{}, nil, Reject("missing required argument %q", "value")
	}
	raw, err := StringArg(args, "value", false, maxValueArg)
	if err != nil {
		return alerts.Query{}, nil, err
	}
	vt, err := StringArg(args, "value_type", false, maxEnumArg)
	if err != nil {
		return alerts.Query{}, nil, err
	}
	v, err := typedValue(raw, vt)
	if err != nil {
		return alerts.Query{}, nil, err
	}
	return alerts.Query{Field: field, Op: op, Value: v}, nil, nil
}

// matched lists the searched keys an alert holds; partial says they are
// only anonymised forms of the address searched for.
func matched(held, keys []string) (out []string, partial bool) {
	exact := false
	for _, k := range keys {
		if slices.Contains(held, k) {
			out = append(out, k)
			exact = exact || !strings.HasPrefix(k, alerts.KeyIPMask+":") || strings.HasPrefix(keys[0], alerts.KeyIPMask+":")
		}
	}
	return out, len(out) > 0 && !exact
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
	Indicator  *searched      `json:"indicator,omitempty"`
	Alerts     []alertSummary `json:"alerts"`
	NextOffset int            `json:"next_offset,omitempty"`
}

// searched is the indicator a search looked for, with its type.
type searched struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

type alertSummary struct {
	ID         string `json:"id"`
	Source     string `json:"source"`
	Type       string `json:"type"`
	Severity   string `json:"severity"`
	Title      string `json:"title"`
	ObservedAt string `json:"observed_at,omitempty"`
	// Matched are the indicator keys the alert holds, for an indicator
	// search; Partial says it holds only an anonymised form of the address.
	Matched []string `json:"matched,omitempty"`
	Partial bool     `json:"partial,omitempty"`
}

func summarize(a alerts.Alert) alertSummary {
	s := alertSummary{ID: a.ID, Source: a.Source, Type: a.Type, Severity: a.Severity, Title: a.Title}
	if !a.ObservedAt.IsZero() {
		s.ObservedAt = a.ObservedAt.UTC().Format(time.RFC3339)
	}
	return s
}

type getAlert struct{ store alerts.Getter }

// Quick: at most one store read.
func (getAlert) Quick() {}

// AlertText: it returns an alert as its sender wrote it.
func (getAlert) AlertText() bool { return true }

func (getAlert) Purpose() string {
	return "Read one stored alert's original data by its ID (the investigated alert or a past one), whole or one field, in pages for a large one."
}

func (getAlert) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name: toolcall.GetAlert,
		Description: "Fetch one stored alert by ID with its original JSON. " +
			"A small alert comes whole: {id, source, type, severity, title, observed_at, data}. " +
			"With path, only that field: {id, path, value}. " +
			"When the data (or the field) is larger than one result holds, it comes in pages of its text " +
			"(compact JSON with keys sorted, or the string itself for a string field): " +
			"{id, path, format, offset, total_bytes, page_bytes, page, next_offset, remaining_bytes}; " +
			"call again with offset = next_offset for the next page (no next_offset: it was the last). " +
			"Path \"@indicators\" pages through every indicator found in the alert, ranked. " +
			"Examples: id \"guardduty-3f9a1c0d2b4e\"; id and path \"detail.service.action\"; id and offset 12034.",
		Parameters: &genai.Schema{
			Type: genai.TypeObject,
			Properties: map[string]*genai.Schema{
				"id": {Type: genai.TypeString, Description: "The alert ID, as the prompt or search_alerts gives it."},
				"path": {Type: genai.TypeString, Description: "Optional: one field, as the field guide writes it: keys joined by dots " +
					"(a key holding a dot between backticks), array elements as [n], e.g. \"events[3].message\"; " +
					"a string that holds JSON is read into. \"@indicators\" for the full indicator list."},
				"offset": {Type: genai.TypeInteger, Description: "Optional: the byte offset of the page to read, from next_offset; default 0."},
			},
			Required: []string{"id"},
		},
	}
}

func (t getAlert) Call(ctx context.Context, args map[string]any) (any, error) {
	id, err := StringArg(args, "id", true, maxIDArg)
	if err != nil {
		return nil, err
	}
	path, err := StringArg(args, "path", false, maxFieldArg)
	if err != nil {
		return nil, err
	}
	offset, err := IntArg(args, "offset", 0, 0, 64<<20)
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
	return readAlert(a, path, offset, resultBudget(ctx))
}
