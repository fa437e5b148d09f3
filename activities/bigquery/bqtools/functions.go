package bqtools

import (
	"fmt"
	"slices"
	"strings"
)

// The function rules of CheckSQL. A query may call GoogleSQL's built-in
// functions over the rows it reads; it may not call anything that reaches
// data outside the configured tables, another project, Cloud Storage or a
// service outside BigQuery, because neither the dry run's referenced tables
// nor the lexical table check can see what such a call reads:
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

// checkCalls applies the function rules above to every call in toks.
func checkCalls(toks []sqlToken, p sqlPolicy) error {
	const only = "only built-in functions over the tables you may query are allowed"
	for j, t := range toks {
		if !t.isPunct("(") || j == 0 {
			continue
		}
		if toks[j-1].isPunct(".") {
			return fmt.Errorf("it uses a chained function call at offset %d, which this guard does not allow; call the function by its name", toks[j-1].pos)
		}
		parts, written := calleePath(toks, j)
		if len(parts) == 0 {
			continue
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
		case len(parts) == 1:
			continue // a built-in function (temporary ones need CREATE, which is refused)
		case len(parts) == 2 && slices.Contains(builtinNamespaces[head], strings.ToUpper(parts[1])):
			continue
		case refusedFamilies[head] != "" && len(parts) == 2:
			return fmt.Errorf("%s %s; %s", written, refusedFamilies[head], only)
		case p.allowsFunction(parts):
			continue
		}
		return fmt.Errorf("%s is a user-defined function qualified by a dataset or project, which may read any table or call a remote endpoint; only built-in functions and the table functions listed under allowed_table_functions in the tables config may be called", written)
	}
	return nil
}

// calleePath returns the name parts written right before the "(" at
// toks[j], with backquoted paths split at their dots and a leading SAFE.
// prefix dropped, and the name as written (for messages).
func calleePath(toks []sqlToken, j int) (parts []string, written string) {
	k := j - 1
	for {
		if k < 0 || !isNamePart(toks[k]) {
			break
		}
		k--
		if k < 0 || !toks[k].isPunct(".") {
			break
		}
		k--
	}
	start := k + 1
	var w strings.Builder
	for _, t := range toks[start:j] {
		switch t.kind {
		case tokQuotedIdent:
			parts = append(parts, strings.Split(t.text, ".")...)
			w.WriteString("`" + t.text + "`")
		case tokNumber: // after a dot, ZetaSQL reads ds.1fn as a name
			parts = append(parts, strings.Split(t.text, ".")...)
			w.WriteString(t.text)
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

// checkModels refuses MODEL followed by a qualified or quoted name, as in
// ML.PREDICT(MODEL ds.m, ...): a model is not a table, and the dry run does
// not list it. MODEL followed by a plain word (a column named model with an
// alias) is left alone.
func checkModels(toks []sqlToken) error {
	for i := 0; i+1 < len(toks); i++ {
		if !toks[i].isWord("MODEL") {
			continue
		}
		next := toks[i+1]
		if next.kind == tokQuotedIdent || (next.kind == tokWord && i+2 < len(toks) && (toks[i+2].isPunct(".") || toks[i+2].isPunct("-"))) {
			name, _ := readPath(toks, i+1)
			return fmt.Errorf("MODEL %s refers to a BigQuery ML model, which may live in another project and is not one of the tables you may query", name)
		}
	}
	return nil
}

// checkTableFunctions refuses a table-valued function in a FROM clause
// (FROM fn(...), JOIN fn(...), |> CALL fn(...)) unless it is UNNEST or
// listed under allowed_table_functions.
func checkTableFunctions(toks []sqlToken, p sqlPolicy) error {
	items, _, err := fromItems(toks)
	if err != nil {
		return err
	}
	for _, it := range items {
		if !it.call || strings.EqualFold(it.name, "UNNEST") || p.allowsFunction(strings.Split(it.name, ".")) {
			continue
		}
		allowed := "none are"
		if len(p.tableFunctions) > 0 {
			allowed = strings.Join(p.tableFunctions, ", ")
		}
		return fmt.Errorf("%s(...) is a table-valued function, and only those listed under allowed_table_functions in the tables config may be used (%s)", it.name, allowed)
	}
	return nil
}
