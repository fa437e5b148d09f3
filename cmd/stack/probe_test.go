package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/secops-agent/investigator/internal/testenv"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// portOf puts addr's port into s under v.
func portOf(t *testing.T, s *Stack, v, addr string) {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	s.ports[v], err = strconv.Atoi(p)
	require.NoError(t, err)
}

// freePort is a port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	p, err := testenv.FreePort()
	require.NoError(t, err)
	return p
}

func TestTCPProbe(t *testing.T) {
	s, _ := testStack(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	portOf(t, s, "X", l.Addr().String())
	require.NoError(t, TCP{Port: "X"}.Check(context.Background(), s, "x"))
	l.Close()
	require.Error(t, TCP{Port: "X"}.Check(context.Background(), s, "x"))
}

func TestHTTPProbe(t *testing.T) {
	s, _ := testStack(t)
	s.ports["TEMPORAL_UI"] = 8233
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/":
			w.Write([]byte("Ok\n"))
		case r.Method == http.MethodOptions && r.Header.Get("Origin") == "http://localhost:8233":
			w.WriteHeader(http.StatusNoContent)
		case r.URL.Path == "/teapot":
			w.WriteHeader(http.StatusTeapot)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	portOf(t, s, "X", srv.Listener.Addr().String())
	ctx := context.Background()
	check := func(p HTTP) error { p.Port = "X"; return p.Check(ctx, s, "x") }

	require.NoError(t, check(HTTP{Path: "/", BodyPrefix: "Ok"}), "Firestore's answer")
	require.ErrorContains(t, check(HTTP{Path: "/", BodyPrefix: "SERVING"}), "something else")
	require.ErrorContains(t, check(HTTP{Path: "/missing"}), "404")
	require.NoError(t, check(HTTP{Path: "/missing", Status: -1}), "any answer will do")
	require.ErrorContains(t, check(HTTP{Path: "/teapot"}), "418", "2xx only by default")
	preflight := HTTP{Method: http.MethodOptions, Path: "/decode", Status: http.StatusNoContent,
		Header: map[string]string{"Origin": "{UI}", "Access-Control-Request-Method": "POST"}}
	require.NoError(t, check(preflight), "the codec server's CORS preflight, from the Web UI's origin")
	s.ports["TEMPORAL_UI"] = 9999
	require.Error(t, check(preflight), "another origin")

	srv.Close()
	require.Error(t, check(HTTP{Path: "/", Status: -1}), "nothing listens")
}

func TestGRPCHealthProbe(t *testing.T) {
	s, _ := testStack(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(l)
	defer srv.Stop()
	portOf(t, s, "TEMPORAL", l.Addr().String())
	const svc = "temporal.api.workflowservice.v1.WorkflowService"
	p := GRPCHealth{Port: "TEMPORAL", Service: svc}
	ctx := context.Background()

	require.Error(t, p.Check(ctx, s, "temporal"), "unknown service: not ready")
	hs.SetServingStatus(svc, healthpb.HealthCheckResponse_NOT_SERVING)
	require.ErrorContains(t, p.Check(ctx, s, "temporal"), "NOT_SERVING")
	hs.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	require.NoError(t, p.Check(ctx, s, "temporal"))

	s.ports["TEMPORAL"] = freePort(t)
	require.Error(t, p.Check(ctx, s, "temporal"), "nothing listens")
}

func TestLogLineProbe(t *testing.T) {
	s, _ := testStack(t)
	p := LogLine{Text: "Started Worker"}
	ctx := context.Background()
	require.Error(t, p.Check(ctx, s, "worker"), "no log yet")
	require.NoError(t, os.MkdirAll(s.LogDir(), 0o755))
	log := filepath.Join(s.LogDir(), "worker.log")
	require.NoError(t, os.WriteFile(log, []byte("starting\n"), 0o644))
	require.Error(t, p.Check(ctx, s, "worker"))
	require.NoError(t, os.WriteFile(log, []byte("starting\nINFO Started Worker Namespace default\n"), 0o644))
	require.NoError(t, p.Check(ctx, s, "worker"))
}
