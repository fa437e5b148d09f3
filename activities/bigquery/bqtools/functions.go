package bqtools

import (
	"fmt"
	"slices"
	"strings"
)

// The function rules of CheckSQL. A query may call the built-in functions
// of allowedFunctions (below) and of the dotted namespaces
// (builtinNamespaces), which read only their arguments, and the table
// functions that allowed_table_functions lists; every other call is
// refused. The messages name why for the families that reach data outside
// the configured tables, another project, Cloud Storage or a service
// outside BigQuery, which neither the dry run's referenced tables nor the
// lexical table check can see:
//
//   - ML.* (except the pure preprocessing functions in pureML): a BigQuery ML
//     model, which may live in another project, and ML.GENERATE_TEXT and the
//     like, which send rows to a remote (Vertex AI) model; ML.WEIGHTS and
//     ML.EVALUATE read a model's contents. Models are not tables, and the dry
//     run lists none.
//   - AI.*: generative AI functions (AI.GENERATE, AI.GENERATE_TABLE, ...),
//     which send rows through a connection to a model outside BigQuery.
//   - OBJ.*: ObjectRef functions (OBJ.MAKE_REF, OBJ.GET_ACCESS_URL, ...),
//     which reach Cloud Storage objects and sign URLs for them.
//   - EXTERNAL_*: EXTERNAL_QUERY (SQL sent to Cloud SQL, Spanner, ...) and
//     EXTERNAL_OBJECT_TRANSFORM (Cloud Storage objects).
//   - VECTOR_SEARCH: reads vector indexes, and can embed its input with a
//     model.
//   - ST_REGIONSTATS: Earth Engine reads the raster it names (a gs:// GeoTIFF,
//     an ee:// asset of any project), billed outside the scan budget.
//   - Cloud KMS: KEYS.KEYSET_CHAIN, KEYS.NEW_WRAPPED_KEYSET,
//     KEYS.REWRAP_KEYSET, KEYS.ROTATE_WRAPPED_KEYSET and DLP_KEY_CHAIN call
//     Cloud KMS, with a key that may be in any project. The other KEYS. and
//     AEAD. functions, and DETERMINISTIC_ENCRYPT/DECRYPT, are pure: with a
//     keyset from a literal or a configured table they read nothing else,
//     so they are allowed.
//   - User functions qualified by a dataset or project (ds.fn(...),
//     `proj.ds.fn`(...)): persistent UDFs, remote functions (which call a
//     Cloud Run or Cloud Functions endpoint) and table functions, whose body
//     may read any table. Only the table functions listed under
//     allowed_table_functions in the tables config may be called.
//   - Chained calls ((expr).fn(...)), which put the function's name where
//     the rules above would not see it.
//
// A dotted name in a built-in namespace (NET., HLL_COUNT., KLL_QUANTILES.,
// KEYS., AEAD., ML.) must be one of its known functions: a dataset can be
// named net too, and an unknown name is read as its user function.

// pureML are the ML. functions that only transform their arguments.
var pureML = []string{
	"DISTANCE", "LP_NORM", "BUCKETIZE", "HASH_BUCKETIZE", "QUANTILE_BUCKETIZE", "NGRAMS", "FEATURE_CROSS",
	"POLYNOMIAL_EXPAND", "MIN_MAX_SCALER", "STANDARD_SCALER", "MAX_ABS_SCALER", "ROBUST_SCALER", "NORMALIZER",
}

// builtinNamespaces lists the functions of GoogleSQL's dotted namespaces
// that CheckSQL allows.
var builtinNamespaces = map[string][]string{
	"NET": {"IP_FROM_STRING", "SAFE_IP_FROM_STRING", "IP_TO_STRING", "IP_NET_MASK", "IP_TRUNC",
		"IPV4_FROM_INT64", "IPV4_TO_INT64", "HOST", "PUBLIC_SUFFIX", "REG_DOMAIN"},
	"HLL_COUNT": {"INIT", "MERGE", "MERGE_PARTIAL", "EXTRACT"},
	"KLL_QUANTILES": {"INIT_INT64", "INIT_UINT64", "INIT_DOUBLE", "MERGE_PARTIAL",
		"MERGE_INT64", "MERGE_UINT64", "MERGE_DOUBLE", "MERGE_POINT_INT64", "MERGE_POINT_UINT64", "MERGE_POINT_DOUBLE",
		"EXTRACT_INT64", "EXTRACT_UINT64", "EXTRACT_DOUBLE", "EXTRACT_POINT_INT64", "EXTRACT_POINT_UINT64", "EXTRACT_POINT_DOUBLE"},
	"KEYS": {"NEW_KEYSET", "ADD_KEY_FROM_RAW_BYTES", "KEYSET_FROM_JSON", "KEYSET_TO_JSON", "ROTATE_KEYSET", "KEYSET_LENGTH"},
	"AEAD": {"ENCRYPT", "DECRYPT_BYTES", "DECRYPT_STRING"},
	"ML":   pureML,
}

// refusedFamilies says, by namespace, why its functions are refused.
var refusedFamilies = map[string]string{
	"ML":  "calls a BigQuery ML model, which may live in another project or send rows to a remote AI model",
	"AI":  "sends rows to a generative AI model outside BigQuery",
	"OBJ": "reaches Cloud Storage objects",
}

// kmsFunctions call Cloud KMS.
var kmsFunctions = []string{"KEYS.KEYSET_CHAIN", "KEYS.NEW_WRAPPED_KEYSET", "KEYS.REWRAP_KEYSET", "KEYS.ROTATE_WRAPPED_KEYSET", "DLP_KEY_CHAIN"}

// allowedFunctions are the functions a query may call by a one-part name:
// GoogleSQL's built-in scalar, aggregate, window, array, JSON, geography,
// date and time, hash, encryption and range functions (ZetaSQL's function
// reference and BigQuery's additions), which read only their arguments.
//
// The rule for this list: a function that names a resource outside the
// query's tables (a URI, a path, an Earth Engine asset, a connection, a
// model, a key, an index or another table by name) is never allowed, since
// the dry run lists no table for it and its bytes are billed outside the
// scan budget (ST_REGIONSTATS reads any GeoTIFF or Earth Engine asset the
// service account can see). TestResourceFunctionsAreRefused lists them.
//
// Left out: table-valued functions (APPENDS, CHANGES, GAP_FILL,
// RANGE_SESSIONIZE, which the tables config may allow), what reaches
// outside BigQuery or other projects (EXTERNAL_QUERY,
// EXTERNAL_OBJECT_TRANSFORM, VECTOR_SEARCH, ST_REGIONSTATS, DLP_KEY_CHAIN,
// ...), ERROR (it only raises a text built from the rows, which would reach
// the session's error), who runs the query (SESSION_USER), and
// protocol-buffer and graph functions. The
// last line holds words that take parentheses without being functions:
// TABLESAMPLE SYSTEM (...), GROUPING SETS (...), PIVOT (...), WEEK(MONDAY),
// arr[OFFSET(0)], and type parameters (NUMERIC(10, 2)).
var allowedFunctions = wordSet(`
	ABS ACOS ACOSH ANY_VALUE APPROX_COUNT_DISTINCT APPROX_QUANTILES APPROX_TOP_COUNT APPROX_TOP_SUM ARRAY
	ARRAY_AGG ARRAY_AVG ARRAY_CONCAT ARRAY_CONCAT_AGG ARRAY_FILTER ARRAY_FIRST ARRAY_INCLUDES ARRAY_INCLUDES_ALL
	ARRAY_INCLUDES_ANY ARRAY_IS_DISTINCT ARRAY_LAST ARRAY_LENGTH ARRAY_MAX ARRAY_MIN ARRAY_REVERSE ARRAY_SLICE
	ARRAY_SUM ARRAY_TO_STRING ARRAY_TRANSFORM ARRAY_ZIP ASCII ASIN ASINH ATAN ATAN2 ATANH AVG BIT_AND
	BIT_CAST_TO_INT32 BIT_CAST_TO_INT64 BIT_CAST_TO_UINT32 BIT_CAST_TO_UINT64 BIT_COUNT BIT_OR BIT_XOR BOOL
	BOOL_ARRAY BYTE_LENGTH CASE CAST CBRT CEIL CEILING CHARACTER_LENGTH CHAR_LENGTH CHR COALESCE
	CODE_POINTS_TO_BYTES CODE_POINTS_TO_STRING COLLATE CONCAT CONTAINS_SUBSTR CORR COS COSH COSINE_DISTANCE
	COT COTH COUNT COUNTIF COVAR_POP COVAR_SAMP CSC CSCH CUME_DIST CURRENT_DATE CURRENT_DATETIME CURRENT_TIME
	CURRENT_TIMESTAMP DATE DATETIME DATETIME_ADD DATETIME_BUCKET DATETIME_DIFF DATETIME_SUB DATETIME_TRUNC
	DATE_ADD DATE_BUCKET DATE_DIFF DATE_FROM_UNIX_DATE DATE_SUB DATE_TRUNC DENSE_RANK
	DETERMINISTIC_DECRYPT_BYTES DETERMINISTIC_DECRYPT_STRING DETERMINISTIC_ENCRYPT DIV EDIT_DISTANCE ENDS_WITH
	EUCLIDEAN_DISTANCE EXISTS EXP EXTRACT FARM_FINGERPRINT FIRST_VALUE FLOAT64 FLOOR FORMAT FORMAT_DATE
	FORMAT_DATETIME FORMAT_TIME FORMAT_TIMESTAMP FROM_BASE32 FROM_BASE64 FROM_HEX GENERATE_ARRAY
	GENERATE_DATE_ARRAY GENERATE_RANGE_ARRAY GENERATE_TIMESTAMP_ARRAY GENERATE_UUID GREATEST GROUPING
	IEEE_DIVIDE IF IFERROR IFNULL IN INITCAP INSTR INT64 IS ISERROR IS_INF IS_NAN JSON_ARRAY JSON_ARRAY_APPEND
	JSON_ARRAY_INSERT JSON_CONTAINS JSON_EXTRACT JSON_EXTRACT_ARRAY JSON_EXTRACT_SCALAR
	JSON_EXTRACT_STRING_ARRAY JSON_FLATTEN JSON_KEYS JSON_OBJECT JSON_QUERY JSON_QUERY_ARRAY JSON_REMOVE
	JSON_SET JSON_STRIP_NULLS JSON_TYPE JSON_VALUE JSON_VALUE_ARRAY JUSTIFY_DAYS JUSTIFY_HOURS
	JUSTIFY_INTERVAL LAG LAST_DAY LAST_VALUE LAX_BOOL LAX_FLOAT64 LAX_INT64 LAX_STRING LEAD LEAST LEFT LENGTH
	LIKE LN LOG LOG10 LOGICAL_AND LOGICAL_OR LOWER LPAD LTRIM MAKE_INTERVAL MAX MAX_BY MD5 MIN MIN_BY MOD
	NORMALIZE NORMALIZE_AND_CASEFOLD NTH_VALUE NTILE NULLIF NULLIFERROR NULLIFZERO OCTET_LENGTH
	PARSE_BIGNUMERIC PARSE_DATE PARSE_DATETIME PARSE_JSON PARSE_NUMERIC PARSE_TIME PARSE_TIMESTAMP
	PERCENTILE_CONT PERCENTILE_DISC PERCENT_RANK PI PI_BIGNUMERIC PI_NUMERIC POW POWER RAND RANGE
	RANGE_BUCKET RANGE_CONTAINS RANGE_END RANGE_INTERSECT RANGE_OVERLAPS RANGE_START RANK REGEXP_CONTAINS
	REGEXP_EXTRACT REGEXP_EXTRACT_ALL REGEXP_INSTR REGEXP_REPLACE REGEXP_SUBSTR REPEAT REPLACE REVERSE RIGHT
	ROUND ROW_NUMBER RPAD RTRIM S2_CELLIDFROMPOINT S2_COVERINGCELLIDS SAFE_ADD SAFE_CAST
	SAFE_CONVERT_BYTES_TO_STRING SAFE_DIVIDE SAFE_MULTIPLY SAFE_NEGATE SAFE_SUBTRACT SEARCH SEC SECH SHA1
	SHA256 SHA512 SIGN SIN SINH SOUNDEX SPLIT SQRT STARTS_WITH STDDEV STDDEV_POP STDDEV_SAMP STRING STRING_AGG
	STRPOS ST_ANGLE ST_AREA ST_ASBINARY ST_ASGEOJSON ST_ASKML ST_ASTEXT ST_AZIMUTH ST_BOUNDARY ST_BOUNDINGBOX
	ST_BUFFER ST_BUFFERWITHTOLERANCE ST_CENTROID ST_CENTROID_AGG ST_CLOSESTPOINT ST_CLUSTERDBSCAN ST_CONTAINS
	ST_CONVEXHULL ST_COVEREDBY ST_COVERS ST_DIFFERENCE ST_DIMENSION ST_DISJOINT ST_DISTANCE ST_DUMP
	ST_DUMPPOINTS ST_DWITHIN ST_ENDPOINT ST_EQUALS ST_EXTENT ST_EXTERIORRING ST_GEOGFROM ST_GEOGFROMGEOJSON
	ST_GEOGFROMKML ST_GEOGFROMTEXT ST_GEOGFROMWKB ST_GEOGPOINT ST_GEOGPOINTFROMGEOHASH ST_GEOHASH
	ST_GEOMETRYTYPE ST_HAUSDORFFDISTANCE ST_HAUSDORFFDWITHIN ST_INTERIORRINGS ST_INTERSECTION ST_INTERSECTS
	ST_INTERSECTSBOX ST_ISCLOSED ST_ISCOLLECTION ST_ISEMPTY ST_ISRING ST_LENGTH ST_LINEINTERPOLATEPOINT
	ST_LINELOCATEPOINT ST_LINESUBSTRING ST_MAKELINE ST_MAKEPOLYGON ST_MAKEPOLYGONORIENTED ST_MAXDISTANCE
	ST_NPOINTS ST_NUMGEOMETRIES ST_NUMPOINTS ST_PERIMETER ST_POINTN ST_SIMPLIFY ST_SNAPTOGRID
	ST_STARTPOINT ST_TOUCHES ST_UNION ST_UNION_AGG ST_WITHIN ST_X ST_Y SUBSTR SUBSTRING SUM TAN TANH TIME
	TIMESTAMP TIMESTAMP_ADD TIMESTAMP_BUCKET TIMESTAMP_DIFF TIMESTAMP_MICROS TIMESTAMP_MILLIS
	TIMESTAMP_SECONDS TIMESTAMP_SUB TIMESTAMP_TRUNC TIME_ADD TIME_DIFF TIME_SUB TIME_TRUNC TO_BASE32
	TO_BASE64 TO_CODE_POINTS TO_HEX TO_JSON TO_JSON_STRING TRANSLATE TRIM TRUNC UNICODE UNIX_DATE UNIX_MICROS
	UNIX_MILLIS UNIX_SECONDS UPPER VARIANCE VAR_POP VAR_SAMP ZEROIFNULL
	SYSTEM SETS PIVOT UNPIVOT WEEK OFFSET ORDINAL SAFE_OFFSET SAFE_ORDINAL BYTES NUMERIC BIGNUMERIC DECIMAL
	BIGDECIMAL`)

// checkCalls applies the function rules above to every call in toks: a
// "(" after a name that is not a reserved keyword (IN (...), OVER (...),
// CAST(...) are syntax, and a reserved keyword cannot name a function).
func checkCalls(toks []sqlToken, p sqlPolicy) error {
	for j, t := range toks {
		if !t.isPunct("(") || j == 0 {
			continue
		}
		prev := toks[j-1]
		if prev.pathDot {
			return fmt.Errorf("it uses a chained function call at offset %d, which this guard does not allow; call the function by its name", prev.pos)
		}
		if (prev.kind != tokWord && prev.kind != tokQuotedIdent) || (prev.kind == tokWord && !prev.afterDot && isReserved(prev.text)) {
			continue
		}
		parts, written := calleePath(toks, j)
		if err := functionRefusal(parts, written, p, false); err != nil {
			return err
		}
	}
	return nil
}

// functionRefusal says why the function parts (as written: written) may
// not be called, or returns nil when it may. tvf: it is called in a FROM
// clause, as a table-valued function, where only UNNEST and what
// allowed_table_functions lists may be.
func functionRefusal(parts []string, written string, p sqlPolicy, tvf bool) error {
	const only = "only built-in functions over the tables you may query are allowed"
	if len(parts) == 0 {
		return fmt.Errorf("the call at %s cannot be read", written)
	}
	upper := strings.ToUpper(strings.Join(parts, "."))
	head := strings.ToUpper(parts[0])
	switch {
	case slices.Contains(kmsFunctions, upper):
		return fmt.Errorf("%s calls Cloud KMS, whose keys may belong to another project; %s", written, only)
	case len(parts) == 1 && strings.HasPrefix(upper, "EXTERNAL_"):
		return fmt.Errorf("%s reads data outside BigQuery; %s", written, only)
	case len(parts) == 1 && upper == "VECTOR_SEARCH":
		return fmt.Errorf("VECTOR_SEARCH reads vector indexes and may call an embedding model; %s", only)
	case len(parts) == 1 && upper == "ST_REGIONSTATS":
		return fmt.Errorf("ST_REGIONSTATS reads a raster image from Cloud Storage or Earth Engine through Earth Engine, outside the tables and the scan budget; %s", only)
	case len(parts) == 1 && upper == "ERROR":
		return fmt.Errorf("ERROR raises a message built from the query's values, which this tool does not allow; %s", only)
	case len(parts) == 2 && refusedFamilies[head] != "" && !slices.Contains(builtinNamespaces[head], strings.ToUpper(parts[1])):
		return fmt.Errorf("%s %s; %s", written, refusedFamilies[head], only)
	case p.allowsFunction(parts), tvf && upper == "UNNEST":
		return nil
	case tvf:
		allowed := "none are"
		if len(p.tableFunctions) > 0 {
			allowed = strings.Join(p.tableFunctions, ", ")
		}
		return fmt.Errorf("%s(...) is a table-valued function, and only those listed under allowed_table_functions in the tables config may be used (%s)", strings.Join(parts, "."), allowed)
	case len(parts) == 1 && allowedFunctions[upper]:
		return nil
	case len(parts) == 2 && slices.Contains(builtinNamespaces[head], strings.ToUpper(parts[1])):
		return nil
	case len(parts) == 1:
		return fmt.Errorf("%s is not one of the built-in functions this tool allows (those that read only their arguments); %s", written, only)
	}
	return fmt.Errorf("%s is a user-defined function qualified by a dataset or project, which may read any table or call a remote endpoint; only built-in functions and the table functions listed under allowed_table_functions in the tables config may be called", written)
}

// calleePath returns the name parts written right before the "(" at
// toks[j] (words and quoted names joined by path dots), with backquoted
// paths split at their dots and a leading SAFE. prefix dropped, and the
// name as written (for messages).
func calleePath(toks []sqlToken, j int) (parts []string, written string) {
	start := j - 1
	for start >= 2 && toks[start-1].pathDot && (toks[start-2].kind == tokWord || toks[start-2].kind == tokQuotedIdent) {
		start -= 2
	}
	var w strings.Builder
	for _, t := range toks[start:j] {
		switch t.kind {
		case tokQuotedIdent:
			parts = append(parts, strings.Split(t.text, ".")...)
			w.WriteString("`" + t.text + "`")
		case tokWord:
			parts = append(parts, t.text)
			w.WriteString(t.text)
		default:
			w.WriteString(t.text)
		}
	}
	if len(parts) > 1 && toks[start].kind == tokWord && strings.EqualFold(parts[0], "SAFE") {
		parts = parts[1:]
	}
	return parts, w.String()
}

// checkModels refuses MODEL or CONNECTION followed by a quoted or
// qualified name, as in ML.PREDICT(MODEL ds.m, ...): models and connections
// are not tables, may live in another project, and the dry run lists
// neither. Followed by a plain word (a column named model with an alias),
// either is left alone: such a name would be looked up in no dataset.
func checkModels(toks []sqlToken) error {
	for i := 0; i+1 < len(toks); i++ {
		kw := toks[i].keyword()
		if kw != "MODEL" && kw != "CONNECTION" {
			continue
		}
		next := toks[i+1]
		joined := i+2 < len(toks) && (toks[i+2].pathDot || toks[i+2].isPunct(".") || toks[i+2].isPunct("-"))
		// A number starts a dashed project name too (MODEL 1-proj.d.m).
		if next.kind == tokQuotedIdent || (next.kind == tokWord && joined) || (next.kind == tokNumber && (joined || strings.HasSuffix(next.text, "."))) {
			name, _ := readPath(toks, i+1)
			what := "a BigQuery ML model"
			if kw == "CONNECTION" {
				what = "a connection to a service outside BigQuery"
			}
			return fmt.Errorf("%s %s refers to %s, which may live in another project and is not one of the tables you may query", kw, name, what)
		}
	}
	return nil
}
