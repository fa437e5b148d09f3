package bqtools

import (
	"encoding/base64"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"

	"github.com/secops-agent/investigator/internal/clip"
)

// maxValueBytes bounds one string value in a result row; longer strings are
// cut and marked, so one log line cannot flood the model's context.
const maxValueBytes = 1000

// rowCutNote replaces what jsonRowWithin leaves out of a row over its
// budget: the rest of an array, or of the row's and records' fields.
const rowCutNote = clip.Marker + "the rest of this row: it is over the result size limit]"

// jsonRowWithin converts a result row to JSON values, each as jsonValue
// does (clipped), spending only about budget bytes of JSON: once they are
// spent, the rest of the array or record being read, and the row's
// remaining columns, become rowCutNote (cut reports it). So one huge row
// (ARRAY_AGG over a table, thousands of columns) is never converted whole.
func jsonRowWithin(row []bigquery.Value, schema bigquery.Schema, budget int) (out []any, cut bool) {
	b := &rowBudget{left: budget}
	out = make([]any, len(row))
	for i, v := range row {
		var f *bigquery.FieldSchema
		if i < len(schema) {
			f = schema[i]
		}
		out[i] = b.value(v, f)
	}
	return out, b.cut
}

type rowBudget struct {
	left int
	cut  bool
}

// value converts v as jsonValue does, charging its JSON size, or returns
// rowCutNote when the budget is spent.
func (b *rowBudget) value(v bigquery.Value, f *bigquery.FieldSchema) any {
	if b.left <= 0 {
		b.cut = true
		return rowCutNote
	}
	list, ok := v.([]bigquery.Value)
	if !ok {
		out := jsonValue(v, f)
		switch x := out.(type) {
		case string:
			b.left -= len(x) + 3
		case map[string]any:
			b.left -= 16 * (len(x) + 1)
			for _, e := range x {
				if s, ok := e.(string); ok {
					b.left -= len(s)
				}
			}
		default:
			b.left -= 24
		}
		return out
	}
	b.left -= 2
	if f != nil && f.Type == bigquery.RecordFieldType && !f.Repeated && len(f.Schema) == len(list) {
		out := make(map[string]any, len(list))
		for i, e := range list {
			b.left -= len(f.Schema[i].Name) + 3
			out[f.Schema[i].Name] = b.value(e, f.Schema[i])
		}
		return out
	}
	var elem *bigquery.FieldSchema
	if f != nil && f.Repeated {
		e := *f
		e.Repeated = false
		elem = &e
	}
	out := make([]any, 0, min(len(list), 64))
	for _, e := range list {
		if b.left <= 0 {
			b.cut = true
			return append(out, rowCutNote)
		}
		out = append(out, b.value(e, elem))
	}
	return out
}

// jsonValue converts one bigquery.Value: timestamps to RFC 3339 in UTC,
// civil dates and times to their canonical text, BYTES to base64, NUMERIC
// and BIGNUMERIC to decimal text, non-finite floats to text, records to
// objects keyed by field name, repeated fields to arrays. f may be nil.
func jsonValue(v bigquery.Value, f *bigquery.FieldSchema) any {
	switch x := v.(type) {
	case nil:
		return nil
	case bool, int64, int:
		return x
	case string:
		return clip.String(x, maxValueBytes)
	case float64:
		switch {
		case math.IsNaN(x):
			return "NaN"
		case math.IsInf(x, 1):
			return "Infinity"
		case math.IsInf(x, -1):
			return "-Infinity"
		}
		return x
	case []byte:
		return clip.String(base64.StdEncoding.EncodeToString(x), maxValueBytes)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case civil.Date:
		return x.String()
	case civil.Time:
		return x.String()
	case civil.DateTime:
		return x.String()
	case *big.Rat:
		if x == nil {
			return nil
		}
		if f != nil && f.Type == bigquery.BigNumericFieldType {
			return trimDecimal(bigquery.BigNumericString(x))
		}
		return trimDecimal(bigquery.NumericString(x))
	case *bigquery.IntervalValue:
		if x == nil {
			return nil
		}
		return x.String()
	case *bigquery.RangeValue:
		if x == nil {
			return nil
		}
		return map[string]any{"start": jsonValue(x.Start, nil), "end": jsonValue(x.End, nil)}
	case map[string]bigquery.Value:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e, nil)
		}
		return out
	case []bigquery.Value:
		if f != nil && f.Repeated {
			elem := *f
			elem.Repeated = false
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = jsonValue(e, &elem)
			}
			return out
		}
		if f != nil && f.Type == bigquery.RecordFieldType && len(f.Schema) == len(x) {
			out := make(map[string]any, len(x))
			for i, e := range x {
				out[f.Schema[i].Name] = jsonValue(e, f.Schema[i])
			}
			return out
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e, nil)
		}
		return out
	}
	return clip.String(fmt.Sprint(v), maxValueBytes)
}

// trimDecimal drops trailing fractional zeros: "3.140000000" → "3.14",
// "3.000000000" → "3".
func trimDecimal(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
