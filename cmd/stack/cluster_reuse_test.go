package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/secops-agent/investigator/internal/procgroup"
	"github.com/secops-agent/investigator/internal/testenv"
)

// clusterEntries are the named entries of the real table without their
// needs: what a start decides for them, alone.
func clusterEntries(t *testing.T, names ...string) []Service {
	t.Helper()
	var out []Service
	for _, n := range names {
		for _, svc := range table {
			if svc.Name == n {
				svc.Needs = nil
				out = append(out, svc)
			}
		}
	}
	require.Len(t, out, len(names))
	return out
}

// serveForeign answers on l as a stranger playing port's service would:
// a Temporal frontend's health check, the Web UI's settings, PostgreSQL's
// request for a password.
func serveForeign(t *testing.T, port string) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	switch port {
	case "TEMPORAL":
		srv, hs := grpc.NewServer(), health.NewServer()
		hs.SetServingStatus("temporal.api.workflowservice.v1.WorkflowService", healthpb.HealthCheckResponse_SERVING)
		healthpb.RegisterHealthServer(srv, hs)
		go srv.Serve(l)
		t.Cleanup(srv.Stop)
	case "TEMPORAL_UI":
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("{}")) })}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
	case "POSTGRES":
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					_, _ = io.ReadFull(c, make([]byte, 8))
					_, _ = c.Write([]byte{'R', 0, 0, 0, 12, 0, 0, 0, 5, 1, 2, 3, 4}) // MD5 password, please
					time.Sleep(time.Second)
				}()
			}
		}()
		t.Cleanup(func() { l.Close() })
	}
	return l
}

// TestClusterRefusesAForeignServer: a Temporal server, Web UI or PostgreSQL
// this stack did not start, answering on one of the cluster's ports, is not
// taken over (a cluster around a dev server's frontend said it ran while
// every workflow went to the dev server's SQLite; Debian's second
// PostgreSQL on 5433 failed the schema job on its password): the start
// refuses in one sentence, before it starts anything.
func TestClusterRefusesAForeignServer(t *testing.T) {
	for _, tc := range []struct{ name, port, title string }{
		{"a Temporal server of the user's own", "TEMPORAL", "Temporal frontend service"},
		{"a Web UI", "TEMPORAL_UI", "Temporal Web UI"},
		{"another PostgreSQL", "POSTGRES", "PostgreSQL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl := clusterEntries(t, "postgres", "temporal-frontend", "temporal-ui")
			s, out := fakeStack(t, tbl)
			portOf(t, s, tc.port, serveForeign(t, tc.port).Addr().String())

			require.ErrorIs(t, newSupervisor(s, tbl, Cluster).up(context.Background()), errFailed)
			require.Contains(t, out.String(), fmt.Sprintf("%s: %s is in use by something this stack did not start from %s (a server of your own, or another data directory's stack); stop it, or move the cluster profile's with STACK_%s_PORT",
				tc.title, s.addr(tc.port), s.show(s.DataDir), tc.port))
			require.NotContains(t, out.String(), "reusing")
			require.NotContains(t, out.String(), "started ", "refused before anything started")
			for _, svc := range tbl {
				require.NoFileExists(t, s.pidFile(svc.Name))
			}
		})
	}
}

// TestClusterRefusesARealDevServer is the reviewer's reproduction: a
// `temporal server start-dev` on the cluster's frontend port passes the
// health check and serves the namespace, but is no part of the cluster.
func TestClusterRefusesARealDevServer(t *testing.T) {
	ctx := context.Background()
	srv, err := testenv.StartTemporal(ctx)
	if err != nil {
		t.Skip("no Temporal CLI:", err)
	}
	t.Cleanup(func() { srv.Stop() })
	tbl := clusterEntries(t, "temporal-frontend")
	s, out := fakeStack(t, tbl)
	portOf(t, s, "TEMPORAL", srv.FrontendHostPort())

	require.ErrorIs(t, newSupervisor(s, tbl, ClusterServer).up(ctx), errFailed)
	require.Contains(t, out.String(), "Temporal frontend service: "+s.addr("TEMPORAL")+" is in use by something this stack did not start from")
	require.NotContains(t, out.String(), "reusing")
}

// TestClusterRefusesTheDevStack: the dev profile's Temporal server, which
// this data directory's stack started, holds the cluster's frontend port:
// the refusal names it, and the way to stop it, and leaves it running.
func TestClusterRefusesTheDevStack(t *testing.T) {
	dev := Service{
		Name: "temporal", Title: "Temporal server", Profiles: []Profile{Dev, Eval},
		Ports: []Port{{"TEMPORAL", 7233}},
		Launch: func(s *Stack, _ int) (Launch, error) {
			return Launch{Argv: []string{os.Args[0], "-test.run=^$"},
				Env: []string{"STACK_TEST_ROLE=grpchealth", "STACK_TEST_ADDR=" + s.addr("TEMPORAL")}}, nil
		},
		Ready:   GRPCHealth{Port: "TEMPORAL", Service: "temporal.api.workflowservice.v1.WorkflowService"},
		Timeout: 20 * time.Second, Match: "stack.test",
	}
	tbl := append([]Service{dev}, clusterEntries(t, "temporal-frontend")...)
	s, out := fakeStack(t, tbl)
	ctx := context.Background()
	require.NoError(t, newSupervisor(s, tbl, Dev).up(ctx), out.String())
	pid := pidOf(t, s, "temporal")

	out.Reset()
	require.ErrorIs(t, newSupervisor(s, tbl, ClusterServer).up(ctx), errFailed)
	require.Contains(t, out.String(), fmt.Sprintf("Temporal frontend service: this data directory's dev or eval stack runs its Temporal server (pid %d) on %s, where the cluster-server profile starts its own; stop it first with 'go tool task stop'",
		pid, s.addr("TEMPORAL")))
	require.NotContains(t, out.String(), "reusing")
	require.True(t, procgroup.Alive(pid), "the dev stack's server is left to 'stop'")
}

// TestReuseOwn: an instance this stack recorded is reused by the next
// start; once it is gone, a stranger on its port is refused.
func TestReuseOwn(t *testing.T) {
	db := fake("db", "http")
	db.Reuse = ReuseOwn
	tbl := []Service{db}
	s, out := fakeStack(t, tbl)
	ctx := context.Background()
	require.NoError(t, newSupervisor(s, tbl, Dev).up(ctx), out.String())
	pid := pidOf(t, s, "db")

	out.Reset()
	require.NoError(t, newSupervisor(s, tbl, Dev).up(ctx), out.String())
	require.Contains(t, out.String(), "db: reusing the one already running (pid "+strconv.Itoa(pid)+")")
	require.True(t, newSupervisor(s, tbl, Dev).stopRecorded())

	srv := &http.Server{Addr: s.addr("DB"), Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("Ok")) })}
	l, err := net.Listen("tcp", srv.Addr)
	require.NoError(t, err)
	go srv.Serve(l)
	defer srv.Close()
	out.Reset()
	require.ErrorIs(t, newSupervisor(s, tbl, Dev).up(ctx), errFailed)
	require.Contains(t, out.String(), "fake db: "+s.addr("DB")+" is in use by something this stack did not start from")
}
