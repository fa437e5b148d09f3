package bqtools

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// resourceCalls call the built-ins that name a resource outside the query's
// tables (a URI, a path, an Earth Engine asset, a connection, a model, a
// KMS key, an index or another table), and ERROR, which only surfaces text.
// The dry run lists no table for any of them and the scan budget does not
// bill what they read, so the guard alone must refuse them.
var resourceCalls = []string{
	"ST_REGIONSTATS(ST_GEOGPOINT(0, 0), 'gs://someone-elses-bucket/secret.tif').mean",
	"ST_REGIONSTATS(ST_GEOGPOINT(0, 0), 'ee://projects/other-project/assets/img')",
	"st_regionstats(ST_GEOGPOINT(0, 0), 'gs://b/o.tif', 'b1')",
	"SAFE.ST_REGIONSTATS(ST_GEOGPOINT(0, 0), 'gs://b/o.tif')",
	"`ST_REGIONSTATS`(ST_GEOGPOINT(0, 0), 'gs://b/o.tif')",
	"ERROR(message)",
	"SAFE.ERROR(message)",
	"EXTERNAL_QUERY('other-proj.us.conn', 'SELECT 1')",
	"EXTERNAL_OBJECT_TRANSFORM(TABLE d.f, ['SIGNED_URL'])",
	"VECTOR_SEARCH(TABLE other_ds.t, 'e', (SELECT [1.0] AS e))",
	"KEYS.KEYSET_CHAIN('gcp-kms://projects/p/locations/l/keyRings/r/cryptoKeys/k', b'')",
	"KEYS.NEW_WRAPPED_KEYSET('gcp-kms://projects/p/locations/l/keyRings/r/cryptoKeys/k', 'AEAD_AES_GCM_256')",
	"KEYS.REWRAP_KEYSET('gcp-kms://a', 'gcp-kms://b', b'')",
	"KEYS.ROTATE_WRAPPED_KEYSET('gcp-kms://a', b'', 'AEAD_AES_GCM_256')",
	"DLP_KEY_CHAIN('gcp-kms://a', b'')",
	"DLP_DETERMINISTIC_ENCRYPT(DLP_KEY_CHAIN('gcp-kms://a', b''), user, 'x')",
	"DLP_DETERMINISTIC_DECRYPT(DLP_KEY_CHAIN('gcp-kms://a', b''), user, 'x')",
	"ML.PREDICT(MODEL other_ds.m, (SELECT 1))",
	"ML.GENERATE_TEXT(MODEL `other-proj.ds.m`, (SELECT 'x' AS prompt))",
	"ML.GENERATE_EMBEDDING(MODEL ds.m, (SELECT 'x' AS content))",
	"ML.EVALUATE(MODEL ds.m)",
	"ML.WEIGHTS(MODEL ds.m)",
	"ML.FORECAST(MODEL ds.m)",
	"ML.DETECT_ANOMALIES(MODEL ds.m)",
	"ML.UNDERSTAND_TEXT(MODEL ds.m, (SELECT 'x'))",
	"ML.TRANSLATE(MODEL ds.m, (SELECT 'x'))",
	"ML.PROCESS_DOCUMENT(MODEL ds.m, TABLE ds.objects)",
	"AI.GENERATE('x', connection_id => 'other-proj.us.conn')",
	"AI.GENERATE_BOOL('x', connection_id => 'c')",
	"AI.GENERATE_TABLE(MODEL ds.m, (SELECT 'x' AS prompt))",
	"AI.FORECAST(TABLE security_logs.auth_events, data_col => 'x', timestamp_col => 'event_time')",
	"AI.EMBED('x', endpoint => 'text-embedding-005')",
	"AI.SEARCH(TABLE other_ds.t, 'c', 'x')",
	"OBJ.MAKE_REF('gs://someone-elses-bucket/file', 'us.conn')",
	"OBJ.FETCH_METADATA(OBJ.MAKE_REF('gs://b/o', 'us.conn'))",
	"OBJ.GET_ACCESS_URL(OBJ.MAKE_REF('gs://b/o', 'us.conn'), 'r')",
}

// TestResourceFunctionsAreRefused: every built-in that reads something
// other than its arguments and the configured tables is refused, wherever
// it stands in the query, and none is on an allow-list.
func TestResourceFunctionsAreRefused(t *testing.T) {
	for _, call := range resourceCalls {
		for _, sql := range []string{
			"SELECT " + call,
			"SELECT e.user FROM security_logs.auth_events AS e WHERE " + call + " IS NOT NULL",
			"SELECT * FROM security_logs.auth_events |> EXTEND " + call + " AS x",
		} {
			assert.Error(t, checkSQL(sql, fuzzPolicy), "%q must be refused", sql)
		}
		name := strings.Trim(strings.TrimPrefix(call[:strings.IndexByte(call, '(')], "SAFE."), "`")
		head, fn, dotted := strings.Cut(strings.ToUpper(name), ".")
		if dotted {
			assert.NotContains(t, builtinNamespaces[head], fn, "%s is on the namespace allow-list", name)
		} else {
			assert.False(t, allowedFunctions[head], "%s is on the allow-list", name)
		}
	}
}
