package tools

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/secops-agent/investigator/alerts"
	"github.com/secops-agent/investigator/internal/prompt"
	"github.com/secops-agent/investigator/investigation"
)

// IndicatorsPath is the get_alert path of the alert's full indicator list.
const IndicatorsPath = "@indicators"

// resultBudget is the most bytes a result may have for the model to see it
// uncut: the cap of the activity running the call, or the default cap.
func resultBudget(ctx context.Context) int {
	if n := CallInfoFrom(ctx).MaxResultBytes; n > 0 {
		return n
	}
	return investigation.DefaultMaxToolResultBytes
}

// wholeAlert is get_alert's result for an alert that fits in one result.
type wholeAlert struct {
	alertSummary
	Data map[string]any `json:"data"`
}

// wholeField is get_alert's result for one field that fits.
type wholeField struct {
	ID    string `json:"id"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// alertPage is one page of an alert's data, a field, or its indicators.
type alertPage struct {
	ID string `json:"id"`
	// The alert's header, on the first page of its whole data only.
	Source     string `json:"source,omitempty"`
	Type       string `json:"type,omitempty"`
	Severity   string `json:"severity,omitempty"`
	Title      string `json:"title,omitempty"`
	ObservedAt string `json:"observed_at,omitempty"`

	Path           string `json:"path,omitempty"`
	Format         string `json:"format"` // "json": compact JSON, keys sorted; "text": a string's own text
	Offset         int    `json:"offset"`
	TotalBytes     int    `json:"total_bytes"`
	PageBytes      int    `json:"page_bytes"`
	NextOffset     int    `json:"next_offset,omitempty"`
	RemainingBytes int    `json:"remaining_bytes"`
	Note           string `json:"note"`
	Page           string `json:"page"`
}

// readAlert is get_alert's answer: the data (or the field at path) whole
// when it fits in budget bytes of result, else the page of its text that
// starts at offset, as much as fits.
func readAlert(a alerts.Alert, path string, offset, budget int) (any, error) {
	var value any = a.Data
	text, format := "", "json"
	switch path {
	case "":
	case IndicatorsPath:
		text, format = indicatorText(a), "text"
	default:
		v, err := alerts.Lookup(a.Data, path)
		if err != nil {
			return nil, Reject("%v", err)
		}
		value = v
	}
	if path != IndicatorsPath {
		if offset == 0 {
			whole := any(wholeAlert{summarize(a), a.Data})
			if path != "" {
				whole = wholeField{a.ID, path, value}
			}
			if n, err := resultSize(whole); err != nil || n <= budget {
				return whole, err
			}
		}
		if s, ok := value.(string); ok {
			text, format = s, "text"
		} else {
			raw, err := prompt.MarshalJSON(value, "")
			if err != nil {
				return nil, fmt.Errorf("encode alert %s: %w", a.ID, err)
			}
			text = string(raw)
		}
	}
	if offset > len(text) {
		return nil, Reject("offset %d is past the end: the %s is %d bytes", offset, what(path, format), len(text))
	}
	for offset > 0 && offset < len(text) && !utf8.RuneStart(text[offset]) {
		offset-- // the start of the character it falls in
	}
	p := alertPage{ID: a.ID, Path: path, Format: format, Offset: offset, TotalBytes: len(text)}
	if path == "" && offset == 0 {
		h := summarize(a)
		p.Source, p.Type, p.Severity, p.Title, p.ObservedAt = h.Source, h.Type, h.Severity, h.Title, h.ObservedAt
	}
	return fillPage(p, text, budget, what(path, format))
}

// fillPage puts into p as much of text from p.Offset as keeps the result
// within budget bytes (at least one character), and says what comes next.
// The first try gives the page the whole budget; each next one takes off
// what the result was over (the envelope), which jsonCost counts exactly.
func fillPage(p alertPage, text string, budget int, what string) (alertPage, error) {
	room := budget
	for range 4 {
		p = withPage(p, text, fit(text[p.Offset:], room), what)
		n, err := resultSize(p)
		if err != nil || n <= budget {
			return p, err
		}
		room -= n - budget
	}
	return p, nil // not reached: the cost model is exact, the loop a guard
}

// withPage sets p's page to the n bytes of text at p.Offset (at least one
// character) and the fields that say what is left.
func withPage(p alertPage, text string, n int, what string) alertPage {
	if n == 0 && p.Offset < len(text) {
		_, n = utf8.DecodeRuneInString(text[p.Offset:])
	}
	end := p.Offset + n
	p.Page, p.PageBytes, p.RemainingBytes, p.NextOffset = text[p.Offset:end], n, len(text)-end, 0
	if end < len(text) {
		p.NextOffset = end
		p.Note = fmt.Sprintf("Bytes %d to %d of %d of the %s. Call get_alert with offset %d for the next page (%d bytes left), or with path for one field.",
			p.Offset, end, len(text), what, end, len(text)-end)
	} else {
		p.Note = fmt.Sprintf("Bytes %d to %d of %d of the %s: the last page.", p.Offset, end, len(text), what)
	}
	return p
}

// what names what a page is of, for its note.
func what(path, format string) string {
	switch {
	case path == "":
		return "alert data (compact JSON, keys sorted)"
	case path == IndicatorsPath:
		return "indicator list"
	case format == "text":
		return "field " + path
	}
	return "field " + path + " (compact JSON, keys sorted)"
}

// resultSize is the size of v as the activity measures a result.
func resultSize(v any) (int, error) {
	raw, err := prompt.MarshalJSON(v, "")
	return len(raw), err
}

// fit returns the length of the longest prefix of s, cut between
// characters, whose JSON string encoding takes at most room bytes.
func fit(s string, room int) int {
	used := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if used += jsonCost(r, size); used > room {
			return i
		}
		i += size
	}
	return len(s)
}

// jsonCost is the bytes encoding/json writes for one character in a
// string (HTML characters not escaped, as prompt.MarshalJSON writes).
func jsonCost(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1:
		return len(`\ufffd`)
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
		return 2
	case r < 0x20 || r == '\u2028' || r == '\u2029':
		return len(`\u0000`)
	}
	return size
}

// indicatorText is every indicator of the alert, ranked, one per line as
// the prompt writes them, and how many more there were.
func indicatorText(a alerts.Alert) string {
	found, omitted := alerts.ScanIndicators(a.Data)
	var b strings.Builder
	for _, in := range found {
		b.WriteString(in.String() + "\n")
	}
	if len(found) == 0 {
		b.WriteString("(no indicators found)\n")
	}
	if omitted > 0 {
		fmt.Fprintf(&b, "(and %d more, past the %d of each kind listed)\n", omitted, alerts.MaxPerKind)
	}
	return b.String()
}
