package main

import (
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/secops-agent/investigator/internal/testenv"
)

// TestTemporalEntry runs the temporal entry's probe and setup against the
// real dev server, started without the search attributes (a reused server,
// or an old .data/temporal.db): the probe asks the service the frontend
// reports on, the setup registers what is missing, a second setup changes
// nothing, and an attribute of another type is an error.
func TestTemporalEntry(t *testing.T) {
	ctx := context.Background()
	srv, err := testenv.StartTemporal(ctx, testenv.WithoutSearchAttributes())
	require.NoError(t, err)
	t.Cleanup(func() { srv.Stop() })
	s, _ := testStack(t)
	host, port, err := net.SplitHostPort(srv.FrontendHostPort())
	require.NoError(t, err)
	s.Host = host
	s.ports["TEMPORAL"], _ = strconv.Atoi(port)
	var temporal Service
	for _, svc := range table {
		if svc.Name == "temporal" {
			temporal = svc
		}
	}
	require.NoError(t, temporal.Ready.Check(ctx, s, "temporal"))

	conn, err := grpc.NewClient(srv.FrontendHostPort(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	op := operatorservice.NewOperatorServiceClient(conn)
	custom := func() map[string]enums.IndexedValueType {
		resp, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.Namespace})
		require.NoError(t, err)
		return resp.GetCustomAttributes()
	}
	require.NotContains(t, custom(), "AlertId")

	require.NoError(t, temporal.Setup(ctx, s))
	require.Equal(t, enums.INDEXED_VALUE_TYPE_KEYWORD, custom()["AlertId"])
	require.Equal(t, enums.INDEXED_VALUE_TYPE_KEYWORD, custom()["Verdict"])
	require.NoError(t, temporal.Setup(ctx, s), "already there")

	_, err = op.RemoveSearchAttributes(ctx, &operatorservice.RemoveSearchAttributesRequest{Namespace: s.Namespace, SearchAttributes: []string{"Verdict"}})
	require.NoError(t, err)
	_, err = op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: s.Namespace,
		SearchAttributes: map[string]enums.IndexedValueType{"Verdict": enums.INDEXED_VALUE_TYPE_TEXT}})
	require.NoError(t, err)
	require.ErrorContains(t, temporal.Setup(ctx, s), "search attribute Verdict on "+srv.FrontendHostPort()+" is Text, not Keyword")
}
