package standin

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// authTable is a table of logins found by its columns in a
// bigquery_schema result: a time, the source address, host, user and a
// success flag; the event type, method and message when it has them.
type authTable struct {
	SQLName                           string
	Name                              string
	Time, Source, Host, User, Success string
	Type, Method, Message             string
}

// Column names the script recognises, by role.
var (
	sourceCols  = []string{"source_ip", "src_ip", "client_ip", "remote_ip", "ip"}
	hostCols    = []string{"host", "hostname", "host_name"}
	userCols    = []string{"user", "username", "user_name", "account"}
	successCols = []string{"success", "succeeded", "successful"}
	typeCols    = []string{"event_type", "type", "action"}
	methodCols  = []string{"auth_method", "method"}
	messageCols = []string{"message", "msg"}
)

// authColumns reads a schema result {table, columns:[{name, type}]}.
func authColumns(sqlName, name string, schema map[string]any) (authTable, bool) {
	t := authTable{SQLName: sqlName, Name: name}
	cols, _ := schema["columns"].([]any)
	for _, c := range cols {
		m, _ := c.(map[string]any)
		col, typ := str(m["name"]), strings.ToUpper(str(m["type"]))
		lower := strings.ToLower(col)
		pick := func(dst *string, names []string) {
			if *dst == "" && slices.Contains(names, lower) {
				*dst = col
			}
		}
		switch typ {
		case "TIMESTAMP":
			if t.Time == "" {
				t.Time = col
			}
		case "BOOL", "BOOLEAN":
			pick(&t.Success, successCols)
		case "STRING":
			pick(&t.Source, sourceCols)
			pick(&t.Host, hostCols)
			pick(&t.User, userCols)
			pick(&t.Type, typeCols)
			pick(&t.Method, methodCols)
			pick(&t.Message, messageCols)
		}
	}
	ok := t.Time != "" && t.Source != "" && t.Host != "" && t.User != "" && t.Success != ""
	return t, ok
}

// quote writes a GoogleSQL string literal.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`, "\r", `\r`).Replace(s) + "'"
}

// stamp writes a TIMESTAMP literal with its zone, as the guard and the
// emulator want it.
func stamp(t time.Time) string {
	return "TIMESTAMP '" + t.UTC().Format(time.DateTime) + "+00'"
}

// between filters the time column to [from, to), or nothing when from is
// zero.
func (t authTable) between(from, to time.Time) string {
	if from.IsZero() {
		return ""
	}
	return fmt.Sprintf(" AND %s >= %s AND %s < %s", t.Time, stamp(from), t.Time, stamp(to))
}

// columns lists the columns that exist, in order.
func columns(cols ...string) string {
	var out []string
	for _, c := range cols {
		if c != "" {
			out = append(out, c)
		}
	}
	return strings.Join(out, ", ")
}

// summarySQL counts the address's events per host, type and outcome.
func (t authTable) summarySQL(ip string, from, to time.Time) string {
	group := columns(t.Host, t.Type, t.Success)
	return fmt.Sprintf("SELECT %s, COUNT(*) AS events, MIN(%s) AS first_seen, MAX(%s) AS last_seen FROM %s WHERE %s = %s%s GROUP BY %s ORDER BY first_seen",
		group, t.Time, t.Time, t.SQLName, t.Source, quote(ip), t.between(from, to), group)
}

// loginsSQL lists the address's successful logins.
func (t authTable) loginsSQL(ip string, from, to time.Time) string {
	return fmt.Sprintf("SELECT %s FROM %s WHERE %s = %s AND %s%s ORDER BY %s LIMIT 20",
		columns(t.Time, t.Host, t.User, t.Method), t.SQLName, t.Source, quote(ip), t.Success, t.between(from, to), t.Time)
}

// sessionSQL lists what a user did on a host in the hour after a login.
func (t authTable) sessionSQL(host, user string, from time.Time) string {
	return fmt.Sprintf("SELECT %s FROM %s WHERE %s = %s AND %s = %s%s ORDER BY %s LIMIT 50",
		columns(t.Time, t.Type, t.Method, t.Message), t.SQLName, t.Host, quote(host), t.User, quote(user), t.between(from, from.Add(time.Hour)), t.Time)
}

// rows reads a bigquery_query result {schema:[names], preview:[[values]]}
// as one map per row.
func rows(res map[string]any) []map[string]any {
	names, _ := res["schema"].([]any)
	preview, _ := res["preview"].([]any)
	out := make([]map[string]any, 0, len(preview))
	for _, p := range preview {
		vals, _ := p.([]any)
		row := map[string]any{}
		for i, n := range names {
			if i < len(vals) {
				row[str(n)] = vals[i]
			}
		}
		out = append(out, row)
	}
	return out
}
