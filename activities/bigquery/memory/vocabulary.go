package memory

import "strings"

// The words a claim may use besides the names in the schemas its session
// read. It is an allow-list, not a list of bad words: English to describe
// tables, columns, types, formats and SQL, and nothing that judges data or
// tells the agent what to leave out. Words of exclusion, filtering, trust
// and judgement (only, not, never, except, without, ignore, skip, exclude,
// filter, drop, trust, safe, benign, expected, noise, test, internal,
// corporate, always, must, should, instead, where) are absent on purpose,
// and so are names of accounts and hosts (admin, root, backup, deploy,
// service, scanner, vpn). A word is also accepted with a plural "s".
var vocabulary = words(`
a an the this that these those such each per one two three both several many some any all other another same either
it its itself they them their which whose what how
of in on at to from by for with within into as than after before between across over under above below up via through
and or but so because when while if then whether since once also together separately directly exactly usually often
sometimes first last
is are was were be been being has have had does do can may might
hold holds held contain contains store stores stored record records recorded mean means meaning name names named
identify identifies identified describe describes described give gives return returns returned report reports reported
tell tells mark marks marked show shows shown use uses used join joins joined match matches matched parse parses parsed
cast casts convert converts converted extract extracts extracted group grouped count counts counted aggregate
aggregated sum order ordered sort sorted unnest unnested select selects selected read reads write writes written
compare compared equal equals link links linked map maps mapped share shares shared refer refers point points differ
differs split combine combined need needs require requires required work works fail fails failed succeed succeeds
succeeded start starts started end ends ended close closes closed open opens opened run runs ran walk find finds found
look appear appears take takes keep keeps add adds get gets set lack lacks lacking cover covers include includes
included format formats formatted encode encodes encoded decode decodes decoded apply applies spell spelled written
break breaks truncate truncated round rounded scale scaled
table column field row value type mode key id identifier path struct array element list entry entries event log line
message text string number integer float decimal boolean flag byte time timestamp date day hour minute second
millisecond microsecond nanosecond epoch zone utc offset window partition cluster clustering partitioned clustered query
queries sql result scan cost index address addresses ip ipv4 ipv6 hostname port protocol account login logon logout
session attempt method command process processes parent child tree pid executable binary hash digest checksum pattern
prefix suffix form case lowercase uppercase letter digit character encoding json base64 hex literal expression function
alias subquery kind source destination remote local client server network domain url file directory detail duration
total percentage percent core cpu unit precision dataset schema description version level outcome failure accepted
rejected denied granted ssh authentication authorization privilege permission password key certificate token agent
user owner group terminal tty instance cloud aws gcp project region zone machine host container pod image
raw full whole exact partial unique distinct single multiple different separate numeric textual nested repeated
optional explicit implicit earliest latest large small long short high low higher lower new old older newer original
canonical standard common typical possible invalid valid present sensitive insensitive plain readable nullable null
empty missing blank default ascending descending earlier later previous next zero
`)

// sqlWords are GoogleSQL keywords, types and built-in functions. The SQL
// the introspection sees keeps them and nothing else of what the model
// wrote beyond the schemas' names; a claim may use them except rowFilters.
var sqlWords = words(`
SELECT FROM JOIN INNER LEFT RIGHT FULL OUTER CROSS ON USING GROUP BY ORDER ASC DESC AS AND OR CASE WHEN THEN ELSE END
WITH UNION ALL DISTINCT OVER PARTITION ROWS RANGE INTERVAL UNNEST IS NULL IN WHERE HAVING QUALIFY LIMIT OFFSET NOT
EXCEPT INTERSECT EXISTS TRUE FALSE LIKE BETWEEN IGNORE RESPECT NULLS WINDOW PRECEDING FOLLOWING CURRENT ROW UNBOUNDED
AT ZONE FOR SYSTEM_TIME OF RECURSIVE PIVOT UNPIVOT TABLESAMPLE PERCENT
STRING BYTES INT64 INTEGER FLOAT64 NUMERIC BIGNUMERIC DECIMAL BOOL BOOLEAN TIMESTAMP DATE TIME DATETIME ARRAY STRUCT
RECORD JSON GEOGRAPHY RANGE REPEATED NULLABLE REQUIRED
YEAR QUARTER MONTH WEEK DAY DAYOFWEEK DAYOFYEAR HOUR MINUTE SECOND MILLISECOND MICROSECOND
COUNT COUNTIF SUM AVG MIN MAX ANY_VALUE ARRAY_AGG STRING_AGG APPROX_COUNT_DISTINCT APPROX_TOP_COUNT APPROX_QUANTILES
LOGICAL_AND LOGICAL_OR BIT_AND BIT_OR STDDEV VARIANCE CORR
CONCAT LOWER UPPER LENGTH CHAR_LENGTH BYTE_LENGTH SUBSTR SUBSTRING TRIM LTRIM RTRIM SPLIT REPLACE REGEXP_CONTAINS
REGEXP_EXTRACT REGEXP_EXTRACT_ALL REGEXP_REPLACE REGEXP_INSTR STARTS_WITH ENDS_WITH STRPOS INSTR FORMAT LPAD RPAD
REVERSE REPEAT LEFT RIGHT INITCAP NORMALIZE TO_BASE64 FROM_BASE64 TO_HEX FROM_HEX SAFE_CONVERT_BYTES_TO_STRING
CODE_POINTS_TO_STRING TO_CODE_POINTS CONTAINS_SUBSTR COLLATE
CAST SAFE_CAST COALESCE IFNULL NULLIF IF
CURRENT_DATE CURRENT_DATETIME CURRENT_TIME CURRENT_TIMESTAMP DATE_ADD DATE_SUB DATE_DIFF DATE_TRUNC DATETIME_ADD
DATETIME_SUB DATETIME_DIFF DATETIME_TRUNC TIME_ADD TIME_SUB TIME_DIFF TIME_TRUNC TIMESTAMP_ADD TIMESTAMP_SUB
TIMESTAMP_DIFF TIMESTAMP_TRUNC TIMESTAMP_SECONDS TIMESTAMP_MILLIS TIMESTAMP_MICROS UNIX_SECONDS UNIX_MILLIS UNIX_MICROS
UNIX_DATE DATE_FROM_UNIX_DATE PARSE_TIMESTAMP PARSE_DATE PARSE_DATETIME PARSE_TIME FORMAT_TIMESTAMP FORMAT_DATE
FORMAT_DATETIME FORMAT_TIME EXTRACT LAST_DAY
GENERATE_ARRAY GENERATE_DATE_ARRAY GENERATE_TIMESTAMP_ARRAY ARRAY_LENGTH ARRAY_TO_STRING ARRAY_CONCAT ARRAY_REVERSE
ARRAY_INCLUDES ORDINAL SAFE_OFFSET SAFE_ORDINAL
JSON_VALUE JSON_QUERY JSON_EXTRACT JSON_EXTRACT_SCALAR JSON_EXTRACT_ARRAY JSON_EXTRACT_STRING_ARRAY JSON_QUERY_ARRAY
JSON_VALUE_ARRAY JSON_TYPE PARSE_JSON TO_JSON TO_JSON_STRING LAX_STRING LAX_INT64 LAX_BOOL LAX_FLOAT64
ROW_NUMBER RANK DENSE_RANK PERCENT_RANK CUME_DIST LAG LEAD FIRST_VALUE LAST_VALUE NTH_VALUE NTILE PERCENTILE_CONT
PERCENTILE_DISC
ABS SIGN ROUND TRUNC FLOOR CEIL CEILING DIV MOD POW POWER SQRT LOG LOG10 LN EXP SAFE_DIVIDE SAFE_ADD SAFE_SUBTRACT
SAFE_MULTIPLY GREATEST LEAST RAND
FARM_FINGERPRINT MD5 SHA1 SHA256 SHA512 GENERATE_UUID
SAFE NET IP_FROM_STRING SAFE_IP_FROM_STRING IP_TO_STRING IP_NET_MASK IP_TRUNC IPV4_FROM_INT64 IPV4_TO_INT64 HOST
PUBLIC_SUFFIX REG_DOMAIN
`)

// rowFilters are the SQL words a claim may not use: they choose which rows
// a query keeps (WHERE, HAVING, QUALIFY, LIMIT, NOT, EXCEPT, EXISTS, LIKE,
// BETWEEN, IGNORE NULLS, samples), or name the constants that pick a subset
// of them (TRUE, FALSE). A memory says what the data is, never which of it
// to leave out.
var rowFilters = words(`WHERE HAVING QUALIFY LIMIT NOT EXCEPT INTERSECT EXISTS TRUE FALSE LIKE BETWEEN IGNORE TABLESAMPLE
RAND`)

// namespaces are the prefixes of dotted built-in function names
// (SAFE.PARSE_TIMESTAMP, NET.HOST); alone, "safe" is a judgement.
var namespaces = words(`SAFE NET`)

// IsSQLWord reports whether w is a GoogleSQL keyword, type or built-in
// function name (ignoring case).
func IsSQLWord(w string) bool { return sqlWords[strings.ToUpper(w)] }

// IsVocabulary reports whether w is an English word a claim may use.
func IsVocabulary(w string) bool {
	l := strings.ToLower(w)
	return vocabulary[l] || (len(l) > 2 && strings.HasSuffix(l, "s") && vocabulary[l[:len(l)-1]])
}

func words(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}
