package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// testStack is a stack with its files in a temporary directory and its
// log in a buffer.
func testStack(t *testing.T) (*Stack, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	dir := t.TempDir()
	s := &Stack{
		Root: dir, UserCwd: dir, DataDir: dir + "/.data", BinDir: dir + "/bin", Host: "127.0.0.1",
		ports: map[string]int{}, Namespace: "default", Project: "demo-investigator",
		StopOnExit: true, SaveOnStop: true, StopTimeout: 5 * time.Second,
		log: newLogger(&out, &out),
	}
	return s, &out
}

func names(in []*instance) []string {
	var out []string
	for _, i := range in {
		out = append(out, i.name)
	}
	return out
}

func TestPlanOrdersByNeeds(t *testing.T) {
	s, _ := testStack(t)
	tbl := []Service{
		{Name: "worker", Profiles: []Profile{Dev, Cluster}, Needs: []string{"temporal", "frontend", "db"}},
		{Name: "temporal", Profiles: []Profile{Dev}},
		{Name: "frontend", Profiles: []Profile{Cluster}, Needs: []string{"history", "db"}},
		{Name: "history", Profiles: []Profile{Cluster}, Needs: []string{"db", "schema"}},
		{Name: "schema", Profiles: []Profile{Cluster}, Needs: []string{"db"}, Job: true},
		{Name: "db", Profiles: []Profile{Dev, Cluster}},
	}
	dev, err := planFor(tbl, Dev, s)
	require.NoError(t, err)
	require.Equal(t, []string{"temporal", "db", "worker"}, names(dev.order))
	require.Equal(t, []string{"temporal", "db"}, dev.byKey["worker"].needs, "needs on entries of the other profile are dropped")

	cl, err := planFor(tbl, Cluster, s)
	require.NoError(t, err)
	order := names(cl.order)
	require.Len(t, order, 5)
	pos := map[string]int{}
	for i, n := range order {
		pos[n] = i
	}
	for _, in := range cl.order {
		for _, need := range in.needs {
			require.Less(t, pos[need], pos[in.name], "%s starts before %s, which it needs: %v", in.name, need, order)
		}
	}
}

func TestPlanCountAndEnabled(t *testing.T) {
	s, _ := testStack(t)
	off := func(*Stack) (bool, string) { return false, "standin: not needed" }
	tbl := []Service{
		{Name: "standin", Profiles: []Profile{Dev, Cluster}, Enabled: off},
		{Name: "worker", Profiles: []Profile{Dev, Cluster}, Count: map[Profile]int{Cluster: 2}, Needs: []string{"standin", "db"}},
		{Name: "db", Profiles: []Profile{Dev, Cluster}},
		{Name: "intake", Profiles: []Profile{Cluster}, Count: map[Profile]int{Cluster: 2}, Needs: []string{"worker"}},
	}
	pl, err := planFor(tbl, Cluster, s)
	require.NoError(t, err)
	require.Equal(t, []string{"db", "worker-1", "worker-2", "intake-1", "intake-2"}, names(pl.order))
	require.Equal(t, []string{"worker-1", "worker-2"}, pl.byKey["intake-2"].needs)
	require.Equal(t, []string{"db"}, pl.byKey["worker-1"].needs, "a need on a disabled entry is met")
	require.Equal(t, 2, pl.byKey["worker-2"].index)
	require.Equal(t, []string{"standin: not needed"}, pl.skipped)

	dev, err := planFor(tbl, Dev, s)
	require.NoError(t, err)
	require.Equal(t, []string{"db", "worker"}, names(dev.order), "one instance, under its own name, where Count says nothing")
}

func TestPlanRejectsBrokenTables(t *testing.T) {
	s, _ := testStack(t)
	for _, tc := range []struct {
		name string
		tbl  []Service
		want string
	}{
		{"unknown need", []Service{{Name: "a", Profiles: []Profile{Dev}, Needs: []string{"b"}}}, `"a" needs "b", which is not in the table`},
		{"cycle", []Service{
			{Name: "a", Profiles: []Profile{Dev}, Needs: []string{"b"}},
			{Name: "b", Profiles: []Profile{Dev}, Needs: []string{"c"}},
			{Name: "c", Profiles: []Profile{Dev}, Needs: []string{"a"}},
			{Name: "d", Profiles: []Profile{Dev}},
		}, "services a, b, c need each other"},
		{"twice", []Service{{Name: "a"}, {Name: "a"}}, `"a" is in the table twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planFor(tc.tbl, Dev, s)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestTheTable checks the real table: every entry can be found again by
// stop (Match), is probed, and the dev stack starts in an order that puts
// the codec server before Temporal and the worker after all it needs,
// with or without the optional services.
func TestTheTable(t *testing.T) {
	for _, svc := range table {
		require.NotEmpty(t, svc.Match, svc.Name)
		require.NotNil(t, svc.Ready, svc.Name)
		require.NotZero(t, svc.Timeout, svc.Name)
		require.NotEmpty(t, svc.Title, svc.Name)
		require.NotNil(t, svc.Launch, svc.Name)
		switch svc.Reuse {
		case ReuseRecorded:
			require.NotNil(t, svc.Settings, svc.Name)
		case ReuseAnswering, ReuseOwn:
			require.NotEmpty(t, svc.Ports, "%s: its port tells whether one runs", svc.Name)
		}
	}
	for _, tc := range []struct {
		key, gemini string
		want        []string
	}{
		{"", "", []string{"bigquery", "temporal", "firestore", "gemini-standin", "worker", "pubsub", "pubsub-topics", "slack-receiver", "intake"}},
		{"/keys.json", "k", []string{"codec-server", "bigquery", "temporal", "firestore", "worker", "pubsub", "pubsub-topics", "slack-receiver", "intake"}},
	} {
		s, _ := testStack(t)
		s.PayloadKeyFile, s.Gemini.Configured = tc.key, tc.gemini != ""
		pl, err := planFor(table, Dev, s)
		require.NoError(t, err)
		require.Equal(t, tc.want, names(pl.order))
	}
	s, _ := testStack(t)
	eval, err := planFor(table, Eval, s)
	require.NoError(t, err)
	require.Equal(t, []string{"bigquery", "temporal", "firestore", "gemini-standin", "eval-worker"}, names(eval.order),
		"the eval's own worker, not the analyst's")

	s.PayloadKeyFile = "/keys.json"
	pl, err := planFor(table, Dev, s)
	require.NoError(t, err)
	require.Equal(t, []string{"codec-server"}, pl.byKey["temporal"].needs)
	require.ElementsMatch(t, []string{"temporal", "firestore"}, pl.byKey["worker"].needs, "stopped before the Firestore save")
	// The intake starts once its topics exist and the worker runs, and
	// without the local receiver when the caller has a Slack webhook.
	require.ElementsMatch(t, []string{"temporal", "firestore", "pubsub", "pubsub-topics", "slack-receiver", "worker"}, pl.byKey["intake"].needs)
	s.OwnSlack = true
	pl, err = planFor(table, Dev, s)
	require.NoError(t, err)
	require.NotContains(t, names(pl.order), "slack-receiver")
	require.Contains(t, s.exports(), "PUBSUB_EMULATOR_HOST="+s.addr("PUBSUB"))
	for _, kv := range s.exports() {
		require.NotContains(t, kv, "SLACK_WEBHOOK_URL", "the caller's webhook (a secret) is not written to stack.env")
	}
}

// TestTheClusterTable: the cluster profile's order and needs. PostgreSQL
// and its schema come before Temporal's services, history and matching
// before the frontend, and the two workers and two intakes after the
// frontend; a stop therefore ends the intakes and workers before the
// services they dial, and PostgreSQL last.
func TestTheClusterTable(t *testing.T) {
	s, _ := testStack(t)
	for _, svc := range table {
		for _, p := range svc.Ports {
			s.ports[p.Var] = p.Default
		}
	}
	pl, err := planFor(table, Cluster, s)
	require.NoError(t, err)
	order := names(pl.order)
	require.Equal(t, []string{"bigquery", "firestore", "gemini-standin", "pubsub", "pubsub-topics", "slack-receiver", "postgres", "temporal-schema",
		"temporal-matching", "temporal-history", "temporal-frontend", "temporal-worker", "temporal-ui", "worker-1", "worker-2", "intake-1", "intake-2"}, order)
	require.NotContains(t, order, "temporal", "no dev server in the cluster")
	for _, in := range pl.order {
		if n := in.svc.Name; n == "postgres" || n == "temporal-ui" || strings.HasPrefix(n, "temporal-") && !in.svc.Job {
			require.Equal(t, ReuseOwn, in.svc.Reuse, "%s: only the one this stack started is reused, not a dev server or another PostgreSQL", n)
		}
	}
	require.ElementsMatch(t, []string{"temporal-schema", "postgres", "temporal-history", "temporal-matching"}, pl.byKey["temporal-frontend"].needs)
	require.ElementsMatch(t, []string{"temporal-frontend", "firestore"}, pl.byKey["worker-2"].needs)
	require.ElementsMatch(t, []string{"temporal-frontend", "firestore", "pubsub", "pubsub-topics", "slack-receiver", "worker-1", "worker-2"}, pl.byKey["intake-2"].needs)
	require.Equal(t, "127.0.0.1:8091", s.intakeAddr(2), "the second intake listens on the next port")
	env := strings.Join(s.temporalPorts(), " ")
	for _, v := range []string{"POSTGRES", "TEMPORAL", "TEMPORAL_HTTP", "TEMPORAL_HISTORY", "TEMPORAL_MATCHING_MEMBERSHIP", "TEMPORAL_WORKER"} {
		require.Contains(t, env, "STACK_"+v+"_PORT=", "config/temporal/cluster.yaml reads it")
	}
	require.NotContains(t, env, "FIRESTORE")

	pl, err = planFor(table, Dev, s)
	require.NoError(t, err)
	require.NotContains(t, names(pl.order), "postgres", "the dev stack runs none of the cluster's services")
}

// TestWalk: each runs after what it follows, independent ones side by
// side; in reverse, each after what needs it; after an error, what had not
// begun is skipped.
func TestWalk(t *testing.T) {
	nodes := func() []*instance {
		return []*instance{
			{name: "db"}, {name: "cache"},
			{name: "api", needs: []string{"db", "cache"}},
			{name: "worker", needs: []string{"api"}},
		}
	}
	var mu sync.Mutex
	var seq []string
	running, most := 0, 0
	record := func(_ context.Context, in *instance) error {
		mu.Lock()
		seq = append(seq, "+"+in.name)
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(30 * time.Millisecond)
		mu.Lock()
		seq = append(seq, "-"+in.name)
		running--
		mu.Unlock()
		return nil
	}
	require.NoError(t, walk(context.Background(), nodes(), false, record))
	require.Equal(t, 2, most, "db and cache start together")
	joined := strings.Join(seq, " ")
	require.Regexp(t, `^\+(db|cache) \+(db|cache) -(db|cache) -(db|cache) \+api -api \+worker -worker$`, joined)

	seq, most = nil, 0
	require.NoError(t, walk(context.Background(), nodes(), true, record))
	require.Regexp(t, `^\+worker -worker \+api -api \+(db|cache) \+(db|cache) -(db|cache) -(db|cache)$`, strings.Join(seq, " "))

	seq = nil
	boom := errors.New("api failed")
	err := walk(context.Background(), nodes(), false, func(ctx context.Context, in *instance) error {
		if err := record(ctx, in); err != nil {
			return err
		}
		if in.name == "api" {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, err, boom)
	require.NotContains(t, seq, "+worker")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, walk(ctx, nodes(), false, record), context.Canceled, "a signal ends the walk")
}

func TestDecide(t *testing.T) {
	const settings, binary = "Gemini stand-in, model default", "crc32c 1 2"
	for _, tc := range []struct {
		name   string
		reuse  Reuse
		o      observed
		want   decision
		reason string
	}{
		{"nothing runs", ReuseAnswering, observed{}, start, ""},
		{"it answers", ReuseAnswering, observed{answering: true, portBusy: true}, reuse, ""},
		{"someone else holds the port", ReuseAnswering, observed{portBusy: true}, refuse, ""},
		{"ours, too busy to answer the probe", ReuseAnswering, observed{portBusy: true, recorded: true}, reuse, ""},
		{"not recorded", ReuseRecorded, observed{}, start, ""},
		{"same settings and program", ReuseRecorded, observed{recorded: true, settings: settings, binary: binary}, reuse, ""},
		{"other settings", ReuseRecorded, observed{recorded: true, settings: "Gemini via GEMINI_API_KEY", binary: binary}, restart, "other settings (Gemini via GEMINI_API_KEY; this run: " + settings + ")"},
		{"rebuilt", ReuseRecorded, observed{recorded: true, settings: settings, binary: "crc32c 3 4"}, restart, "its program changed"},
		{"a dev session owns it", ReuseRecorded, observed{recorded: true, settings: "old", binary: binary, devOwner: true}, keep, "other settings"},
		{"recorded without settings", ReuseRecorded, observed{recorded: true}, restart, "(unknown; this run"},
		{"never reused: none runs", ReuseNever, observed{}, start, ""},
		{"never reused: one was left", ReuseNever, observed{recorded: true, settings: settings, binary: binary}, restart, "a new one"},
		{"never reused, even under a dev session", ReuseNever, observed{recorded: true, devOwner: true}, restart, "a new one"},
		{"own: nothing runs", ReuseOwn, observed{}, start, ""},
		{"own: the recorded one answers", ReuseOwn, observed{answering: true, recorded: true}, reuse, ""},
		{"own: the recorded one, too busy to answer", ReuseOwn, observed{portBusy: true, recorded: true}, reuse, ""},
		{"own: a stranger answers", ReuseOwn, observed{answering: true}, refuse, ""},
		{"own: a stranger holds the port", ReuseOwn, observed{portBusy: true}, refuse, ""},
		{"own: the recorded one listens nowhere", ReuseOwn, observed{recorded: true}, restart, "none of its ports"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, why := decide(tc.reuse, tc.o, settings, binary)
			require.Equal(t, tc.want, d)
			if tc.reason == "" {
				require.Empty(t, why)
			} else {
				require.Contains(t, why, tc.reason)
			}
		})
	}
}

// TestWebUIListensOnLoopback: the cluster's Web UI server proxies the whole
// Temporal API without authentication, so it listens on the stack's host
// (127.0.0.1) only: its configuration, rendered as the server renders it
// from the environment the stack launches it with (and from none), names a
// loopback host. Without one the server listens on every interface.
func TestWebUIListensOnLoopback(t *testing.T) {
	s, _ := testStack(t)
	for _, svc := range table {
		for _, p := range svc.Ports {
			s.ports[p.Var] = p.Default
		}
	}
	s.UIServer = filepath.Join(s.BinDir, "temporal-ui-server")
	require.NoError(t, os.MkdirAll(s.BinDir, 0o755))
	require.NoError(t, os.WriteFile(s.UIServer, []byte("#!/bin/sh\n"), 0o755))
	var l Launch
	for _, svc := range table {
		if svc.Name == "temporal-ui" {
			var err error
			l, err = svc.Launch(s, 1)
			require.NoError(t, err)
		}
	}
	require.NotEmpty(t, l.Argv, "the cluster table launches the Web UI")
	raw, err := os.ReadFile("../../config/temporal-ui/cluster.yaml")
	require.NoError(t, err)
	for name, env := range map[string][]string{"launched": l.Env, "no environment": nil} {
		vars := map[string]string{}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			vars[k] = v
		}
		// The two template functions the file uses, as sprig defines them.
		funcs := template.FuncMap{
			"env": func(k string) string { return vars[k] },
			"default": func(d string, v ...string) string {
				if len(v) == 0 || v[0] == "" {
					return d
				}
				return v[0]
			},
		}
		tpl, err := template.New("ui").Funcs(funcs).Parse(string(raw))
		require.NoError(t, err)
		var out bytes.Buffer
		require.NoError(t, tpl.Execute(&out, nil))
		var cfg struct {
			Host string `yaml:"host"`
			Port int    `yaml:"port"`
		}
		require.NoError(t, yaml.Unmarshal(out.Bytes(), &cfg))
		ip := net.ParseIP(cfg.Host)
		require.True(t, ip != nil && ip.IsLoopback(), "%s: the Web UI listens on %q:%d, not loopback only", name, cfg.Host, cfg.Port)
	}
}
