package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/investigation"
)

// memStore holds alerts by ID.
type memStore map[string]alerts.Alert

func (m memStore) Get(_ context.Context, id string) (alerts.Alert, error) {
	a, ok := m[id]
	if !ok {
		return a, fmt.Errorf("alert %q: %w", id, alerts.ErrNotFound)
	}
	return a, nil
}

func (m memStore) Search(context.Context, alerts.Query) ([]alerts.Alert, error) { return nil, nil }

// LastField is the value of the field that comes last in an alert's compact
// JSON (keys sorted), as bigAlert writes it.
const lastField = "the last field: exfiltration to 203.0.113.250 confirmed"

// bigAlert is a parsed alert of about size bytes whose last field (in key
// order) is zz_last.
func bigAlert(t *testing.T, size int) alerts.Alert {
	t.Helper()
	var events []any
	for i := 0; len(events)*100 < size; i++ {
		events = append(events, map[string]any{
			"n":   i,
			"msg": fmt.Sprintf("connection %d from 10.1.%d.%d with \"quotes\", a back\\slash and a line\nbreak: 漢字", i, i/256%256, i%256),
		})
	}
	raw, err := json.Marshal(map[string]any{"rule": "exfil", "events": events, "zz_last": lastField})
	require.NoError(t, err)
	a, err := alerts.Parse(raw)
	require.NoError(t, err)
	return a
}

// page calls get_alert and returns its result as the model sees it.
func page(t *testing.T, ctx context.Context, s memStore, args map[string]any) (map[string]any, int) {
	t.Helper()
	out, err := NewGetAlert(s).Call(ctx, args)
	require.NoError(t, err, args)
	raw, err := prompt.MarshalJSON(out, "")
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m, len(raw)
}

// Paging reaches the last field of a 200 KiB alert: each page fits the
// activity's cap (16 KiB unless the call says otherwise), says where the
// next starts and how much is left, and the pages put together are the
// data. Before, get_alert took only an ID and returned the whole alert,
// which the activity cut at 16 KiB.
func TestGetAlertPagesA200KiBAlertToItsLastField(t *testing.T) {
	a := bigAlert(t, 200<<10)
	s := memStore{a.ID: a}
	whole, err := prompt.MarshalJSON(a.Data, "")
	require.NoError(t, err)
	require.Greater(t, len(whole), 200<<10)

	for _, limit := range []int{0, 4 << 10, investigation.DefaultMaxToolResultBytes * 2} {
		t.Run(fmt.Sprintf("cap %d", limit), func(t *testing.T) {
			ctx := WithCallInfo(context.Background(), CallInfo{MaxResultBytes: limit})
			budget := resultBudget(ctx)
			var got strings.Builder
			offset, pages := 0, 0
			for {
				m, size := page(t, ctx, s, map[string]any{"id": a.ID, "offset": float64(offset)})
				pages++
				require.LessOrEqual(t, size, budget, "page %d fits the cap", pages)
				require.Equal(t, "json", m["format"])
				require.EqualValues(t, offset, m["offset"])
				require.EqualValues(t, len(whole), m["total_bytes"])
				got.WriteString(m["page"].(string))
				require.EqualValues(t, len(whole)-got.Len(), m["remaining_bytes"])
				next, more := m["next_offset"].(float64)
				if !more {
					require.Contains(t, m["note"], "the last page")
					break
				}
				require.Contains(t, m["note"], fmt.Sprintf("offset %d", int(next)))
				require.Greater(t, int(next), offset)
				offset = int(next)
				require.Less(t, pages, 1000)
			}
			require.Equal(t, string(whole), got.String(), "the pages put together are the data")
			require.True(t, strings.HasSuffix(got.String(), `"zz_last":"`+lastField+`"}`), "the last field was read")
			t.Logf("cap %d: %d pages of %d bytes", budget, pages, len(whole))
		})
	}

	// The first page carries the header; the others do not repeat it.
	m, _ := page(t, context.Background(), s, map[string]any{"id": a.ID})
	require.Equal(t, "generic", m["source"])
	require.Equal(t, "exfil", m["type"])
	m, _ = page(t, context.Background(), s, map[string]any{"id": a.ID, "offset": 100.0})
	require.Nil(t, m["source"])

	// Straight to the last field by its path.
	m, _ = page(t, context.Background(), s, map[string]any{"id": a.ID, "path": "zz_last"})
	require.Equal(t, map[string]any{"id": a.ID, "path": "zz_last", "value": lastField}, m)
	m, _ = page(t, context.Background(), s, map[string]any{"id": a.ID, "path": "events[700].msg"})
	require.Contains(t, m["value"], "connection 700 from 10.1.2.188")
}

// A field too large for one result pages through its own text (a string
// as it is, not JSON-escaped), cut between characters, whatever it holds.
func TestGetAlertPagesAStringField(t *testing.T) {
	text := strings.Repeat("quote \" backslash \\ tab \t nul \x00 sep \u2028 漢字 <&> é ", 1200) + "END"
	a, err := alerts.Parse([]byte(fmt.Sprintf(`{"rule":"x","request":%s}`, mustJSON(t, text))))
	require.NoError(t, err)
	s := memStore{a.ID: a}
	ctx := WithCallInfo(context.Background(), CallInfo{MaxResultBytes: 3000})
	var got strings.Builder
	for offset := 0; ; {
		m, size := page(t, ctx, s, map[string]any{"id": a.ID, "path": "request", "offset": float64(offset)})
		require.LessOrEqual(t, size, 3000)
		require.Equal(t, "text", m["format"])
		got.WriteString(m["page"].(string))
		next, more := m["next_offset"].(float64)
		if !more {
			break
		}
		offset = int(next)
	}
	require.Equal(t, text, got.String())

	// An offset inside a character starts at that character.
	i := strings.Index(text, "漢") + 1
	m, _ := page(t, ctx, s, map[string]any{"id": a.ID, "path": "request", "offset": float64(i)})
	require.EqualValues(t, i-1, m["offset"])
	require.True(t, strings.HasPrefix(m["page"].(string), "漢字"))
}

func mustJSON(t *testing.T, v any) string {
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return string(raw)
}

func TestGetAlertPathsAndRejections(t *testing.T) {
	inner := mustJSON(t, map[string]any{"src_ip": "203.0.113.9", "http": map[string]any{"host": "shop.example.cn"}})
	a, err := alerts.Parse([]byte(`{"rule":"x","raw_log":` + mustJSON(t, inner) + `,"labels":{"app.kubernetes.io/name":"web"},"list":[{"a":1},{"a":2}]}`))
	require.NoError(t, err)
	s := memStore{a.ID: a}
	ctx := context.Background()
	for path, want := range map[string]any{
		"raw_log.http.host":               "shop.example.cn", // into the JSON a string holds
		"labels.`app.kubernetes.io/name`": "web",
		"list[1].a":                       float64(2),
		"list.0.a":                        float64(1),
	} {
		m, _ := page(t, ctx, s, map[string]any{"id": a.ID, "path": path})
		require.Equal(t, want, m["value"], path)
	}
	for _, c := range []struct {
		args map[string]any
		err  string
	}{
		{map[string]any{"id": a.ID, "path": "nope"}, `no field "nope" in the alert's data: its fields are labels, list, raw_log, rule`},
		{map[string]any{"id": a.ID, "path": "list[5]"}, `"list" has 2 elements: [5] is past its end`},
		{map[string]any{"id": a.ID, "path": "rule.x"}, `"rule" is a string, which has no fields`},
		{map[string]any{"id": a.ID, "path": "a..b"}, "empty segment"},
		{map[string]any{"id": a.ID, "offset": 1e7}, "offset 10000000 is past the end"},
		{map[string]any{"id": a.ID, "offset": -1.0}, `"offset" must be a whole number`},
		{map[string]any{"id": strings.Repeat("x", 300)}, `argument "id" is too long`},
		{map[string]any{"id": a.ID, "path": strings.Repeat("x", 2000)}, `argument "path" is too long`},
	} {
		_, err := NewGetAlert(s).Call(ctx, c.args)
		require.ErrorContains(t, err, c.err)
		require.True(t, IsRejection(err), "the model reads it: %v", err)
	}
}

// The indicator list the prompt caps is whole through get_alert.
func TestGetAlertIndicators(t *testing.T) {
	var ips []any
	for i := range 3000 {
		ips = append(ips, fmt.Sprintf("198.51.%d.%d", i/256, i%256))
	}
	a, err := alerts.Parse([]byte(mustJSON(t, map[string]any{"rule": "scan", "targets": ips, "user": `CORP\eve`})))
	require.NoError(t, err)
	s := memStore{a.ID: a}
	var got strings.Builder
	for offset := 0; ; {
		m, size := page(t, context.Background(), s, map[string]any{"id": a.ID, "path": IndicatorsPath, "offset": float64(offset)})
		require.LessOrEqual(t, size, investigation.DefaultMaxToolResultBytes)
		got.WriteString(m["page"].(string))
		next, more := m["next_offset"].(float64)
		if !more {
			break
		}
		offset = int(next)
	}
	lines := strings.Split(strings.TrimSuffix(got.String(), "\n"), "\n")
	require.Len(t, lines, alerts.MaxPerKind+2)
	require.Equal(t, "ipv4 198.51.0.0 (at targets[0])", lines[0])
	require.Equal(t, `user CORP\eve (at user)`, lines[alerts.MaxPerKind])
	require.Equal(t, "(and 1000 more, past the 2000 of each kind listed)", lines[len(lines)-1])
}

// search_alerts refuses over-long arguments with a rejection the model
// reads, before anything reaches the store. Before, value had no limit.
func TestSearchAlertsArgumentsAreLengthLimited(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	for _, c := range []struct {
		args map[string]any
		err  string
	}{
		{map[string]any{"field": "type", "op": "==", "value": long(maxValueArg + 1)}, `argument "value" is too long (4097 bytes, at most 4096)`},
		{map[string]any{"field": long(maxFieldArg + 1), "op": "==", "value": "x"}, `argument "field" is too long`},
		{map[string]any{"field": "type", "op": long(100), "value": "x"}, `argument "op" is too long`},
		{map[string]any{"field": "type", "op": "==", "value": "x", "value_type": long(100)}, `argument "value_type" is too long`},
		{map[string]any{"indicator": long(alerts.MaxIndicatorBytes + 1)}, `argument "indicator" is too long`},
		{map[string]any{"indicator": "1.2.3.4", "indicator_type": long(100)}, `argument "indicator_type" is too long`},
		{map[string]any{"field": "ip", "op": "in", "value": "[" + strings.Repeat(`"1.2.3.4",`, 500) + `"x"]`, "value_type": "array"}, `argument "value" is too long`},
	} {
		s := &recordingStore{}
		_, err := NewSearchAlerts(s).Call(context.Background(), c.args)
		require.ErrorContains(t, err, c.err)
		require.True(t, IsRejection(err))
		require.Empty(t, s.queries, "nothing reaches the store")
	}
}

func TestSearchAlertsByIndicator(t *testing.T) {
	gd := alerts.Alert{ID: "guardduty-1", Source: "guardduty", Indicators: []string{"ip:203.0.113.9", "domain:x.example.com"}}
	waf := alerts.Alert{ID: "generic-2", Source: "generic", Indicators: []string{"ipmask:*.*.113.9"}}
	s := &recordingStore{found: []alerts.Alert{gd, waf}}
	out, err := NewSearchAlerts(s).Call(context.Background(), map[string]any{"indicator": " 203.0.113.9 ", "limit": 2.0})
	require.NoError(t, err)
	require.Len(t, s.queries, 1)
	q := s.queries[0]
	require.Empty(t, q.Field)
	require.Equal(t, "ip:203.0.113.9", q.Indicators[0])
	require.Contains(t, q.Indicators, "ipmask:*.*.113.9")
	list := out.(alertList)
	require.Equal(t, &searched{Type: "ip", Value: "203.0.113.9"}, list.Indicator)
	require.Equal(t, []string{"ip:203.0.113.9"}, list.Alerts[0].Matched)
	require.False(t, list.Alerts[0].Partial)
	require.Equal(t, []string{"ipmask:*.*.113.9"}, list.Alerts[1].Matched)
	require.True(t, list.Alerts[1].Partial, "an anonymised form is a partial match")
	require.Equal(t, 2, list.NextOffset)

	_, err = NewSearchAlerts(s).Call(context.Background(), map[string]any{"indicator": "ws-fin-07", "indicator_type": "domain"})
	require.NoError(t, err)
	require.Equal(t, []string{"domain:ws-fin-07"}, s.queries[1].Indicators)

	for _, c := range []struct {
		args map[string]any
		err  string
	}{
		{map[string]any{"indicator": "1.2.3.4", "field": "type"}, `give either indicator or field, op and value, not both ("field" was given with indicator)`},
		{map[string]any{"indicator": "1.2.3.999", "indicator_type": "ip"}, `"1.2.3.999" is not an IP address`},
		{map[string]any{"indicator": "x", "indicator_type": "url"}, `unknown indicator type "url"`},
		{map[string]any{"indicator_type": "ip"}, "indicator_type was given without indicator"},
		{map[string]any{}, "give indicator (an IP, domain, hash, user...) or field, op and value"},
		{map[string]any{"field": "x", "op": "=="}, `missing required argument "value"`},
	} {
		_, err := NewSearchAlerts(s).Call(context.Background(), c.args)
		require.ErrorContains(t, err, c.err)
		require.True(t, IsRejection(err))
	}
	require.Len(t, s.queries, 2)
}

// A field Firestore reserves (__name__, in any segment, quoted or not) is
// a rejection the model reads, found before any store call (the store
// here has no Firestore client), not a store error retried for a minute.
func TestSearchAlertsRejectsReservedFieldNames(t *testing.T) {
	for _, f := range []string{"__name__", "`__name__`", "a.__x__"} {
		_, err := NewSearchAlerts(&alerts.Store{}).Call(context.Background(), map[string]any{"field": f, "op": "==", "value": "x"})
		require.Error(t, err, f)
		require.True(t, IsRejection(err), "%s: %v", f, err)
		require.ErrorContains(t, err, "which Firestore reserves", f)
	}
}
