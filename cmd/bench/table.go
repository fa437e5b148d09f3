package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// row is one figure of the table. Value is nil when the figure could not be
// measured; NA then says why.
type row struct {
	Figure string   `json:"figure"`
	Value  *float64 `json:"value"`
	Unit   string   `json:"unit,omitempty"`
	NA     string   `json:"na,omitempty"`
	Detail string   `json:"detail,omitempty"`
}

// report is the whole output: settings, rows and how each was measured.
type report struct {
	Date     string   `json:"date"`
	Settings string   `json:"settings"`
	Rows     []row    `json:"rows"`
	Notes    []string `json:"notes"`
}

// Units, as printed after the number.
const (
	unitRatio = "×"
	unitPct   = "%"
	unitMs    = "ms"
	unitSec   = "s"
	unitKiB   = "KiB"
	unitMiB   = "MiB"
	unitCount = ""
)

func figure(name string, v float64, unit, detail string) row {
	return row{Figure: name, Value: &v, Unit: unit, Detail: detail}
}

func na(name, why, detail string) row {
	return row{Figure: name, NA: why, Detail: detail}
}

// cell is the printed value: the number with its unit, or "n/a (why)".
func (r row) cell() string {
	if r.Value == nil {
		return "n/a (" + r.NA + ")"
	}
	v := *r.Value
	prec := 2
	switch {
	case r.Unit == unitPct || r.Unit == unitMs || (r.Unit == unitCount && v == float64(int64(v))) || v >= 1000:
		prec = 0
	case v >= 100:
		prec = 1
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	switch r.Unit {
	case "", unitRatio, unitPct:
		return s + r.Unit
	}
	return s + " " + r.Unit
}

func (rep *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// writeTable prints the settings, one Markdown table and the notes.
func (rep *report) writeTable(w io.Writer) error {
	header := []string{"figure", "value", "measured as"}
	cells := [][]string{header}
	for _, r := range rep.Rows {
		cells = append(cells, []string{r.Figure, r.cell(), r.Detail})
	}
	widths := make([]int, len(header))
	for _, c := range cells {
		for i, s := range c {
			widths[i] = max(widths[i], utf8.RuneCountInString(s))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s: %s\n\n", rep.Date, rep.Settings)
	line := func(c []string) {
		b.WriteString("|")
		for i, s := range c {
			b.WriteString(" " + s + strings.Repeat(" ", widths[i]-utf8.RuneCountInString(s)) + " |")
		}
		b.WriteString("\n")
	}
	line(cells[0])
	b.WriteString("|")
	for i := range header {
		b.WriteString(strings.Repeat("-", widths[i]+2) + "|")
	}
	b.WriteString("\n")
	for _, c := range cells[1:] {
		line(c)
	}
	b.WriteString("\n")
	for i, n := range rep.Notes {
		fmt.Fprintf(&b, "%d. %s\n", i+1, n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// dur prints a duration with two significant decimals in a natural unit.
func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
	default:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 0, 64) + " ms"
	}
}

func kib(bytes float64) string {
	if bytes >= 1<<20 {
		return strconv.FormatFloat(bytes/(1<<20), 'f', 2, 64) + " MiB"
	}
	return strconv.FormatFloat(bytes/1024, 'f', 1, 64) + " KiB"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
