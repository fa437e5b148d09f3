package alerts

import (
	"errors"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/testenv"
)

// One Firestore emulator serves all the store tests of this package; it is
// started by the first test that needs it and stopped by TestMain.
var emulator struct {
	once sync.Once
	host string
	stop func()
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if emulator.stop != nil {
		emulator.stop()
	}
	os.Exit(code)
}

// newTestStore returns a store on an emptied emulator database.
func newTestStore(t *testing.T) *Store {
	t.Helper()
	emulator.once.Do(func() {
		emulator.host, emulator.stop, emulator.err = testenv.StartFirestore()
	})
	require.NoError(t, emulator.err)
	require.NoError(t, testenv.ResetFirestore(emulator.host, testenv.Project))
	t.Setenv("FIRESTORE_EMULATOR_HOST", emulator.host)
	fs, err := firestore.NewClient(t.Context(), testenv.Project)
	require.NoError(t, err)
	t.Cleanup(func() { fs.Close() })
	return NewStore(fs)
}

func importExamples(t *testing.T, s *Store) map[string]Alert {
	t.Helper()
	byFile := map[string]Alert{}
	for _, e := range examples {
		a := parseExample(t, e.file)
		require.NoError(t, s.Put(t.Context(), a))
		byFile[e.file] = a
	}
	return byFile
}

func ids(as []Alert) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}

func TestStorePutGet(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	for _, e := range examples {
		a := parseExample(t, e.file)
		before := time.Now()
		require.NoError(t, s.Put(ctx, a))

		got, err := s.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.WithinRange(t, got.ImportedAt, before.Add(-time.Second), time.Now().Add(time.Second), "Put sets ImportedAt")
		assert.True(t, got.ObservedAt.Equal(a.ObservedAt))
		got.ImportedAt, got.ObservedAt = time.Time{}, a.ObservedAt
		assert.NotEmpty(t, got.Indicators, "Put stores the indicator keys")
		a.Indicators = IndexKeys(Indicators(a.Data))
		assert.Equal(t, a, got, "%s should come back as stored, numbers as float64, nulls and empty arrays kept", e.file)
	}
}

func TestStorePutOddKeysRoundTrip(t *testing.T) {
	s := newTestStore(t)
	a, err := Parse([]byte(`{"labels":{"app.kubernetes.io/name":"web","sp ace":"x","dash-x":true,"back` + "`" + `tick":[1,{"a":null}]},"n":1e300,"neg":-0.5}`))
	require.NoError(t, err)
	require.NoError(t, s.Put(t.Context(), a))
	got, err := s.Get(t.Context(), a.ID)
	require.NoError(t, err)
	assert.Equal(t, a.Data, got.Data)

	found, err := s.Search(t.Context(), Query{Field: "labels.`app.kubernetes.io/name`", Op: "==", Value: "web"})
	require.NoError(t, err)
	assert.Equal(t, []string{a.ID}, ids(found), "a key with dots is searchable between backticks")
	found, err = s.Search(t.Context(), Query{Field: "labels.sp ace", Op: "==", Value: "x"})
	require.NoError(t, err)
	assert.Equal(t, []string{a.ID}, ids(found))
	found, err = s.Search(t.Context(), Query{Field: "labels.dash-x", Op: "==", Value: true})
	require.NoError(t, err)
	assert.Equal(t, []string{a.ID}, ids(found))
}

func TestStorePutKeepsFirstImportTime(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	a := parseExample(t, "scc-cryptominer.json")
	require.NoError(t, s.Put(ctx, a))
	first, err := s.Get(ctx, a.ID)
	require.NoError(t, err)

	time.Sleep(5 * time.Millisecond)
	require.NoError(t, s.Put(ctx, a), "importing the same alert again is fine")
	second, err := s.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.True(t, first.ImportedAt.Equal(second.ImportedAt), "re-import keeps the first ImportedAt: %v vs %v", first.ImportedAt, second.ImportedAt)

	explicit := time.Date(2026, 1, 2, 3, 4, 5, 678901234, time.FixedZone("x", 3600))
	a.ImportedAt = explicit
	require.NoError(t, s.Put(ctx, a))
	third, err := s.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, explicit.UTC().Truncate(time.Microsecond), third.ImportedAt, "an explicit ImportedAt wins")
}

func TestStorePutRejectsBadIDs(t *testing.T) {
	s := &Store{} // rejected before any Firestore call
	err := s.Put(t.Context(), Alert{})
	require.EqualError(t, err, "the alert has no ID; parse it with alerts.Parse first")
	err = s.Put(t.Context(), Alert{ID: "a/b"})
	require.EqualError(t, err, `alert ID "a/b" is not valid`)
}

func TestStoreGetNotFound(t *testing.T) {
	s := newTestStore(t)
	_, err := s.Get(t.Context(), "guardduty-000000000000")
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrNotFound))
	assert.EqualError(t, err, `alert "guardduty-000000000000" not found`)

	_, err = s.Get(t.Context(), "a/b")
	assert.ErrorIs(t, err, ErrNotFound, "an ID that cannot exist is simply not found")

	_, err = s.Get(t.Context(), "  ")
	require.EqualError(t, err, "the alert ID is empty")
	assert.False(t, errors.Is(err, ErrNotFound))
}

func TestStoreList(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	got, err := s.List(ctx, 10)
	require.NoError(t, err)
	assert.Empty(t, got)

	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var want []string
	for i, e := range examples {
		a := parseExample(t, e.file)
		a.ImportedAt = base.Add(time.Duration(i) * time.Hour)
		require.NoError(t, s.Put(ctx, a))
		want = append([]string{a.ID}, want...) // newest first
	}

	got, err = s.List(ctx, 100)
	require.NoError(t, err)
	assert.Equal(t, want, ids(got))

	got, err = s.List(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, want[:3], ids(got))

	got, err = s.List(ctx, 0)
	require.NoError(t, err)
	assert.Len(t, got, min(10, len(want)), "limit 0 means the default")
}

func TestStoreSearch(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	ex := importExamples(t, s)
	id := func(file string) string { return ex[file].ID }

	tests := []struct {
		name string
		q    Query
		want []string
	}{
		{
			name: "== on a deep GuardDuty field",
			q:    Query{Field: "service.action.networkConnectionAction.remoteIpDetails.ipAddressV4", Op: "==", Value: "198.51.100.23"},
			want: []string{id("guardduty-ssh-bruteforce.json"), id("history/guardduty-ssh-bruteforce-bastion-01.json")},
		},
		{
			name: "== on a normalised field",
			q:    Query{Field: "@severity", Op: "==", Value: "high"},
			want: []string{id("scc-cryptominer.json"), id("history/edr-mde-web-server-prod-01.json"), id("history/guardduty-c2-dns-web-server-prod-01.json"),
				id("waf-sqli-cn.json"), id("siem-struts2-rce-raw-log.json")},
		},
		{
			name: ">= on a number (strings of other alerts do not compare)",
			q:    Query{Field: "severity", Op: ">=", Value: 7.0},
			want: []string{id("history/guardduty-c2-dns-web-server-prod-01.json")},
		},
		{
			name: "< with a Go int",
			q:    Query{Field: "service.count", Op: "<", Value: 20},
			want: []string{id("history/guardduty-c2-dns-web-server-prod-01.json")},
		},
		{
			name: "array-contains",
			q:    Query{Field: "indicator.ipAddresses", Op: "array-contains", Value: "198.51.100.23"},
			want: []string{id("history/scc-bad-ip-gce-etl-runner-2.json")},
		},
		{
			name: "array-contains-any",
			q:    Query{Field: "targets", Op: "array-contains-any", Value: []any{"bastion-01", "nope"}},
			want: []string{id("history/generic-authorized-vuln-scan.json")},
		},
		{
			name: "in",
			q:    Query{Field: "@source", Op: "in", Value: []any{"scc", "edr"}},
			want: []string{id("scc-cryptominer.json"), id("history/scc-bad-ip-gce-etl-runner-2.json"), id("history/edr-mde-web-server-prod-01.json")},
		},
		{
			name: "not-in only matches alerts that have the field",
			q:    Query{Field: "finding.severity", Op: "not-in", Value: []string{"LOW", "MEDIUM"}},
			want: []string{id("scc-cryptominer.json")},
		},
		{
			name: "!= on a boolean",
			q:    Query{Field: "service.archived", Op: "!=", Value: true},
			want: []string{id("guardduty-ssh-bruteforce.json"), id("history/guardduty-c2-dns-web-server-prod-01.json")},
		},
		{
			name: "== null",
			q:    Query{Field: "resource.instanceDetails.platform", Op: "==", Value: nil},
			want: []string{id("guardduty-ssh-bruteforce.json")},
		},
		{
			name: "a key with a dash in the EventBridge envelope",
			q:    Query{Field: "detail-type", Op: "==", Value: "GuardDuty Finding"},
			want: []string{id("history/guardduty-portprobe-web-server-prod-01.json")},
		},
		{
			name: "nothing matches",
			q:    Query{Field: "service.action.networkConnectionAction.remoteIpDetails.ipAddressV4", Op: "==", Value: "192.0.2.1"},
			want: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Search(ctx, tt.q)
			require.NoError(t, err)
			assert.ElementsMatch(t, tt.want, ids(got))
			for _, a := range got {
				assert.NotEmpty(t, a.Data, "search results carry the alert data")
			}
		})
	}
}

func TestStoreSearchPaging(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	ex := importExamples(t, s)
	var all []string
	for _, a := range ex {
		if a.Source == SourceGuardDuty {
			all = append(all, a.ID)
		}
	}
	require.Len(t, all, 5)

	var seen []string
	for offset, wantLen := range map[int]int{0: 2, 2: 2, 4: 1, 6: 0} {
		page, err := s.Search(ctx, Query{Field: "@source", Op: "==", Value: "guardduty", Limit: 2, Offset: offset})
		require.NoError(t, err)
		assert.Len(t, page, wantLen, "offset %d", offset)
		seen = append(seen, ids(page)...)
	}
	sort.Strings(seen)
	sort.Strings(all)
	assert.Equal(t, all, seen, "the pages cover every match exactly once")

	page, err := s.Search(ctx, Query{Field: "@source", Op: "==", Value: "guardduty"})
	require.NoError(t, err)
	assert.Len(t, page, 5, "default limit 10")
	page, err = s.Search(ctx, Query{Field: "@source", Op: "==", Value: "guardduty", Limit: 1})
	require.NoError(t, err)
	assert.Len(t, page, 1)
}

// Parse's size estimate is conservative: what it accepts, the emulator stores.
func TestStorePutNearSizeLimit(t *testing.T) {
	s := newTestStore(t)
	raw := "{\"n\":[" + strings.TrimSuffix(strings.Repeat("1,", 120000), ",") + "]}"
	a, err := Parse([]byte(raw))
	require.NoError(t, err)
	require.NoError(t, s.Put(t.Context(), a))
	got, err := s.Get(t.Context(), a.ID)
	require.NoError(t, err)
	assert.Len(t, got.Data["n"], 120000)
}

// Exact numbers survive Firestore, and searches compare int64 and float64
// numerically as Firestore does.
func TestStoreExactNumbers(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	a, err := Parse([]byte(`{"type":"exact","eventId":9007199254740993,"count":7,"ratio":0.5,"big":123456789012345678901234567890}`))
	require.NoError(t, err)
	require.NoError(t, s.Put(ctx, a))
	got, err := s.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, a.Data, got.Data, "int64, float64 and the kept literal come back as they were stored")

	for _, q := range []Query{
		{Field: "eventId", Op: "==", Value: int64(9007199254740993)},
		{Field: "count", Op: "==", Value: 7.0},
		{Field: "count", Op: "==", Value: 7},
		{Field: "count", Op: "in", Value: []any{6.5, int64(7)}},
		{Field: "ratio", Op: "<", Value: int64(1)},
		{Field: "big", Op: "==", Value: "123456789012345678901234567890"},
	} {
		found, err := s.Search(ctx, q)
		require.NoError(t, err, "%+v", q)
		assert.Equal(t, []string{a.ID}, ids(found), "%s %s %v", q.Field, q.Op, q.Value)
	}
	found, err := s.Search(ctx, Query{Field: "eventId", Op: "==", Value: int64(9007199254740992)})
	require.NoError(t, err)
	assert.Empty(t, found, "2^53 is not 2^53+1")
}

// One address, written by GuardDuty, Security Command Center and Defender
// for Endpoint in three different fields, finds all of their alerts; so do
// an anonymised form of it (as a partial match), a host name in another
// case and a user written DOMAIN\user.
func TestStoreSearchByIndicatorAcrossSources(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	ex := importExamples(t, s)
	id := func(file string) string { return ex[file].ID }
	extra := func(raw string) string {
		a, err := Parse([]byte(raw))
		require.NoError(t, err)
		require.NoError(t, s.Put(ctx, a))
		return a.ID
	}
	waf := extra(`{"告警名称":"SSH暴力破解","攻击IP":"XXX.XXX.100.23","目的主机":"WEB-SERVER-PROD-01.corp.example.com","用户":"CORP\\Deploy"}`)
	other := extra(`{"rule":"x","src":"XXX.XXX.100.24","md5":"D41D8CD98F00B204E9800998ECF8427E"}`)

	search := func(typ, value string) []string {
		keys, err := SearchKeys(typ, value)
		require.NoError(t, err)
		found, err := s.Search(ctx, Query{Indicators: keys, Limit: 100})
		require.NoError(t, err)
		return ids(found)
	}
	assert.ElementsMatch(t, []string{
		id("guardduty-ssh-bruteforce.json"),
		id("history/guardduty-ssh-bruteforce-bastion-01.json"),
		id("history/guardduty-portprobe-web-server-prod-01.json"),
		id("history/scc-bad-ip-gce-etl-runner-2.json"),
		id("history/edr-mde-web-server-prod-01.json"),
		waf,
	}, search("", "198.51.100.23"), "GuardDuty, SCC and EDR layouts, and the anonymised XXX.XXX.100.23")
	assert.ElementsMatch(t, []string{waf}, search(KeyIPMask, "xxx.xxx.100.23"))
	assert.ElementsMatch(t, []string{waf}, search(KeyDomain, "web-server-prod-01.CORP.example.com."))
	assert.ElementsMatch(t, []string{waf, id("history/edr-mde-web-server-prod-01.json")}, search(KeyUser, "deploy"),
		"CORP\\Deploy is also the user deploy, whom the EDR alert names")
	assert.ElementsMatch(t, []string{other}, search("", "d41d8cd98f00b204e9800998ecf8427e"), "hashes in any case")
	assert.Empty(t, search("", "198.51.100.99"))

	// Mixed with a field condition it is refused.
	_, err := s.Search(ctx, Query{Indicators: []string{"ip:1.2.3.4"}, Field: "type", Op: "==", Value: "x"})
	require.ErrorIs(t, err, ErrInvalidQuery)
}

// An alert stored before indicator keys existed has none: a search by
// indicator misses it until it is read once (Get writes them back) or
// imported again (Put).
func TestStoreBackfillsIndicatorKeysOnRead(t *testing.T) {
	s := newTestStore(t)
	ctx := t.Context()
	a := parseExample(t, "history/scc-bad-ip-gce-etl-runner-2.json")
	b := parseExample(t, "history/edr-mde-web-server-prod-01.json")
	for _, old := range []Alert{a, b} {
		_, err := s.col.Doc(old.ID).Set(ctx, map[string]any{ // the document as older versions wrote it
			"id": old.ID, "source": old.Source, "type": old.Type, "severity": old.Severity, "title": old.Title,
			"observed_at": old.ObservedAt, "imported_at": time.Now(), "data": old.Data,
		})
		require.NoError(t, err)
	}
	keys, err := SearchKeys(KeyIP, "198.51.100.23")
	require.NoError(t, err)
	search := func() []string {
		found, err := s.Search(ctx, Query{Indicators: keys})
		require.NoError(t, err)
		return ids(found)
	}
	require.Empty(t, search(), "not found before")

	got, err := s.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Contains(t, got.Indicators, "ip:198.51.100.23", "the alert read has its keys")
	assert.Equal(t, []string{a.ID}, search(), "and they were written back")

	require.NoError(t, s.Put(ctx, b))
	assert.ElementsMatch(t, []string{a.ID, b.ID}, search(), "importing again writes them too")

	listed, err := s.List(ctx, 10)
	require.NoError(t, err)
	for _, l := range listed {
		assert.Contains(t, l.Indicators, "ip:198.51.100.23")
	}
}
