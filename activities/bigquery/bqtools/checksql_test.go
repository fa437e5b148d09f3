package bqtools

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckSQLAccepts(t *testing.T) {
	for _, sql := range []string{
		"SELECT 1",
		"select 1",
		"SeLeCt 1;",
		"SELECT 1;  \n  -- done\n",
		"SELECT 1; /* trailing comment */",
		"  -- a comment first\nSELECT 1",
		"# hash comment\nSELECT 1",
		"/* block; comment DELETE */ SELECT 1",
		"/* multi\nline */\nSELECT 1",
		"SELECT ';' AS semicolon",
		`SELECT "a;b" AS s`,
		`SELECT 'it\'s; fine' AS s`,
		`SELECT "say \"hi\"; DROP TABLE t" AS s`,
		"SELECT '''multi\nline; DROP TABLE t''' AS s",
		`SELECT """triple "double"; quoted""" AS s`,
		`SELECT r'\d+;' AS re`,
		`SELECT R"raw ; string" AS re`,
		`SELECT r'a\'; DROP TABLE t' AS s`, // \' does not end a raw literal either
		`SELECT b'bytes;', rb'raw;bytes', BR"x;y"`,
		"SELECT `weird;name`, `a` FROM `project.dataset.table`",
		"SELECT * FROM t WHERE note = 'DELETE FROM t; DROP TABLE t'",
		"SELECT 1 -- trailing; comment",
		"SELECT 1 # ; comment",
		"SELECT t.update, `delete`, t.`insert` FROM t", // keywords as column names, qualified or quoted
		"SELECT 1.5e-3, 0x1F, .5",
		"WITH a AS (SELECT 1 AS x) SELECT * FROM a",
		"with a as (select 1), b as (select 2) select * from a, b",
		"WITH a AS (SELECT ')' AS p), b AS (SELECT '(' AS q) SELECT * FROM a, b",
		"WITH RECURSIVE t AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM t WHERE n < 3) SELECT * FROM t",
		"WITH `quoted name` AS (SELECT (1 + (2 * 3)) AS x) SELECT * FROM `quoted name`",
		"WITH a AS (SELECT 1) (SELECT * FROM a)",
		"WITH a AS (SELECT 1) WITH b AS (SELECT 2) SELECT 3",
		"(SELECT 1) UNION ALL (SELECT 2)",
		"((SELECT 1))",
		"SELECT\n  source_ip,\n  COUNT(*) AS n\nFROM security_logs.auth_events\nWHERE event_time >= TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 1 DAY)\nGROUP BY 1\nORDER BY n DESC\nLIMIT 10;",
		// Line ends: ZetaSQL ends -- and # comments at \r, \n or \r\n.
		"-- DELETE\rSELECT 1",
		"# DELETE\r\nSELECT 1",
		"SELECT 1 -- trailing\r\n",
		"SELECT\r\n  1\r\nFROM t\r\n",
		// Unicode spaces (ZetaSQL skips them) between words.
		"SELECT\u00a01\u3000FROM\u2003t",
		"SELECT 'caf\u00e9; DROP TABLE t' AS s", // non-ASCII inside a literal is content
		// An exponent keeps its sign only before a digit.
		"SELECT 1e-5, 2E+10, 0x1e-5 FROM t",
		// Pure ML preprocessing functions read only their arguments; names in
		// literals are text. (ML.PREDICT, once accepted here, is now refused:
		// its model may live in another project.)
		"SELECT ML.DISTANCE([1.0, 2.0], [3.0, 4.0])",
		`SELECT 'EXTERNAL_QUERY(1)' AS s, "INFORMATION_SCHEMA" AS t`,
		"SELECT external_query_count FROM t",
	} {
		assert.NoError(t, CheckSQL(sql), "%q should be accepted", sql)
	}
}

func TestCheckSQLRefuses(t *testing.T) {
	for _, tc := range []struct{ sql, reason string }{
		{"", "empty"},
		{"   \n\t ", "empty"},
		{"-- only a comment", "empty"},
		{"/* only */ # comments", "empty"},
		{";", "empty"},
		{"SELECT 1;;", "only one statement"},
		{"SELECT 1; DROP TABLE t", "only one statement"},
		{"SELECT 1; SELECT 2", "only one statement"},
		{"SELECT 1;\n-- comment\nDELETE FROM t WHERE true", "only one statement"},
		{"SELECT ';'; DROP TABLE t", "only one statement"},
		{"SELECT '''a;''' ; DROP TABLE t", "only one statement"},
		{`SELECT "a\"" ; DROP TABLE t`, "only one statement"},
		{"SELECT `a;b`; DROP TABLE t", "only one statement"},
		{"SELECT 1 # comment ; \n; DROP TABLE t", "only one statement"},
		{"SELECT 1 /* ; */ ; DROP TABLE t", "only one statement"},
		{"INSERT INTO t VALUES (1)", "INSERT statement modifies data"},
		{"insert into t (a) select 1", "INSERT statement modifies data"},
		{"UPDATE t SET a = 1 WHERE true", "UPDATE statement modifies data"},
		{"DELETE FROM t WHERE true", "DELETE statement modifies data"},
		{"MERGE t USING s ON t.id = s.id WHEN MATCHED THEN DELETE", "MERGE statement modifies data"},
		{"TRUNCATE TABLE t", "TRUNCATE statement modifies data"},
		{"CREATE TABLE t AS SELECT 1", "CREATE statement creates"},
		{"create or replace view v as select 1", "CREATE statement creates"},
		{"CREATE TEMP FUNCTION f() AS (1); SELECT f()", "only one statement"},
		{"DROP TABLE t", "DROP statement"},
		{"ALTER TABLE t ADD COLUMN c INT64", "ALTER statement"},
		{"GRANT `roles/bigquery.dataViewer` ON TABLE t TO 'user:x@example.com'", "GRANT statement changes permissions"},
		{"REVOKE `roles/bigquery.dataViewer` ON TABLE t FROM 'user:x@example.com'", "REVOKE statement changes permissions"},
		{"EXPORT DATA OPTIONS (uri = 'gs://b/*.csv', format = 'CSV') AS SELECT 1", "EXPORT statement moves data"},
		{"LOAD DATA INTO t FROM FILES (format = 'CSV', uris = ['gs://b/x.csv'])", "LOAD statement moves data"},
		{"CALL mydataset.proc()", "CALL statement runs a procedure"},
		{"EXECUTE IMMEDIATE 'DROP TABLE t'", "EXECUTE statement runs"},
		{"DECLARE x INT64", "DECLARE statement is procedural scripting"},
		{"SET x = 1", "SET statement is procedural scripting"},
		{"BEGIN TRANSACTION", "BEGIN statement is procedural scripting"},
		{"BEGIN SELECT 1; END", "only one statement"},
		{"WITH x AS (SELECT 1) DELETE FROM t WHERE true", "after the WITH clause: a DELETE statement modifies data"},
		{"WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x", "after the WITH clause: a INSERT statement"},
		{"WITH x AS (SELECT 1), y AS (SELECT 2) UPDATE t SET a = 1 WHERE true", "after the WITH clause"},
		{"WITH x AS (SELECT 1)", "not followed by a SELECT"},
		{"WITH x AS (SELECT 1", "not closed"},
		{"WITH SELECT 1", "malformed WITH clause"},
		{"WITH x (SELECT 1) SELECT 1", "expected AS"},
		{"/* SELECT */ DELETE FROM t WHERE true", "DELETE statement"},
		{"-- SELECT\nDROP TABLE t", "DROP statement"},
		{"(DELETE FROM t WHERE true)", "DELETE statement"},
		{"(", "no SELECT"},
		{"FROM t |> WHERE x = 1", "starts with FROM"},
		{"'SELECT 1'", "starts with a string literal"},
		{"SELECT 'unterminated", "not closed"},
		{"SELECT 'one\nline'", "not closed on its line"},
		{"SELECT '''unterminated", "not closed"},
		{"SELECT 1 /* unterminated", "not closed"},
		{"SELECT `unterminated", "not closed"},
		// A \r ends a -- or # comment in ZetaSQL, so what follows is a
		// statement (the audit's bypass: the emulator ran the DELETE).
		{"SELECT 1 --x\r; DELETE FROM security_logs.auth_events WHERE true", "only one statement"},
		{"SELECT 1 #x\r; DELETE FROM security_logs.auth_events WHERE true", "only one statement"},
		{"SELECT 1 --x\r\n; DELETE FROM security_logs.auth_events WHERE true", "only one statement"},
		{"SELECT 1 #x\r\n; DELETE FROM security_logs.auth_events WHERE true", "only one statement"},
		{"-- SELECT\rDELETE FROM t WHERE true", "DELETE statement"},
		// After a dot ZetaSQL reads 1e as a field name and -- as a comment;
		// reading "1e-" as a number hid the ; in a triple-quoted literal (the
		// emulator ran the DELETE).
		{"SELECT 1 FROM (SELECT STRUCT(1 AS `1e`) AS s) AS x WHERE x.s.1e--'''\nIS NOT NULL; DELETE FROM security_logs.auth_events WHERE true --'''", "only one statement"},
		{"SELECT x.1E--'''\n; DROP TABLE t --'''", "only one statement"},
		// String literals: escapes, triple quotes, raw and bytes forms.
		{`SELECT 'a\\'; DROP TABLE t`, "only one statement"}, // \\ is one escape, then ' closes
		{`SELECT r'a\\'; DROP TABLE t`, "only one statement"},
		{`SELECT b'\''; DROP TABLE t`, "only one statement"},
		{`SELECT 'it\'s; DROP TABLE t`, "not closed"},
		{`SELECT rb"""x"""; DROP TABLE t`, "only one statement"},
		{"SELECT '''a''''; DROP TABLE t", "not closed"}, // ''' closes, the fourth ' opens a literal
		{`SELECT """a""" "; DROP TABLE t`, "not closed"},
		{"SELECT 'a\r'; DROP TABLE t'", "not closed on its line"},
		// Block comments do not nest; -- and /* mean nothing inside each other.
		{"SELECT 1 /* /* */ ; DROP TABLE t */", "only one statement"},
		{"SELECT 1 /* -- */ ; DROP TABLE t", "only one statement"},
		{"SELECT 1 -- /*\n; DROP TABLE t */", "only one statement"},
		{"SELECT 1 /*/ ; DROP TABLE t", "not closed"},
		// Quoted identifiers: no escapes, no line breaks.
		{"SELECT `a\\`; DROP TABLE t`", "backslash escape"},
		{"SELECT * FROM `EXTERNAL\\x5fQUERY`('c', 'SELECT 1')", "backslash escape"},
		{"SELECT `a\n; DROP TABLE t`", "not closed on its line"},
		// Control characters and Unicode spaces separate tokens.
		{"SELECT 1\x00; DROP TABLE t", "only one statement"},
		{"SELECT 1\u00a0;\u00a0DROP TABLE t", "only one statement"},
		// Escape hatches that read outside the configured tables.
		{"SELECT * FROM EXTERNAL_QUERY('us.conn', 'SELECT * FROM users')", "EXTERNAL_QUERY sends SQL to an external database outside the tables you may query"},
		{"select * from external_query('us.conn', 'SELECT 1')", "EXTERNAL_QUERY"},
		{"SELECT * FROM `EXTERNAL_QUERY`('us.conn', 'SELECT 1')", "EXTERNAL_QUERY"},
		{"SELECT * FROM\u00a0EXTERNAL_QUERY('us.conn', 'SELECT 1')", "EXTERNAL_QUERY"},
		{"WITH x AS (SELECT * FROM EXTERNAL_QUERY('c', 'SELECT 1')) SELECT * FROM x", "EXTERNAL_QUERY"},
		{"SELECT * FROM EXTERNAL_OBJECT_TRANSFORM(TABLE d.files, ['SIGNED_URL'])", "EXTERNAL_OBJECT_TRANSFORM reads Cloud Storage objects"},
		{"SELECT query FROM region-us.INFORMATION_SCHEMA.JOBS", "INFORMATION_SCHEMA views describe datasets and jobs"},
		{"SELECT query FROM `region-us`.INFORMATION_SCHEMA.JOBS", "INFORMATION_SCHEMA"},
		{"SELECT * FROM `p.region-us.information_schema.jobs_by_project`", "INFORMATION_SCHEMA"},
		{"SELECT table_name FROM security_logs.INFORMATION_SCHEMA.TABLES", "INFORMATION_SCHEMA"},
		{"SELECT * FROM ML.PREDICT(MODEL `m.model`, (SELECT 1 AS x))", "ML.PREDICT calls a BigQuery ML model"},
	} {
		err := CheckSQL(tc.sql)
		if assert.Error(t, err, "%q should be refused", tc.sql) {
			assert.Contains(t, err.Error(), tc.reason, "reason for %q", tc.sql)
		}
	}
}

func TestCheckSQLRefusalSaysWhatIsAllowed(t *testing.T) {
	err := CheckSQL("DELETE FROM security_logs.auth_events WHERE true")
	assert.EqualError(t, err, "a DELETE statement modifies data (DML); only a single read-only SELECT (or WITH ... SELECT) query is allowed")
}

func TestLexSQL(t *testing.T) {
	toks, err := lexSQL("SELECT r'a\\'b', `x.y`, 1e+5 FROM t -- c\n/* d */ # e")
	assert.NoError(t, err)
	var kinds []tokKind
	var texts []string
	for _, tk := range toks {
		kinds = append(kinds, tk.kind)
		texts = append(texts, tk.text)
	}
	assert.Equal(t, []string{"SELECT", `a\'b`, ",", "x.y", ",", "1e+5", "FROM", "t"}, texts)
	assert.Equal(t, []tokKind{tokWord, tokString, tokPunct, tokQuotedIdent, tokPunct, tokNumber, tokWord, tokWord}, kinds)
}
