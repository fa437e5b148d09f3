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

// jsonRow converts a result row to JSON-friendly values, positionally, using
// the schema for records (which become objects) and numeric types.
func jsonRow(row []bigquery.Value, schema bigquery.Schema) []any {
	out := make([]any, len(row))
	for i, v := range row {
		var f *bigquery.FieldSchema
		if i < len(schema) {
			f = schema[i]
		}
		out[i] = jsonValue(v, f)
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
