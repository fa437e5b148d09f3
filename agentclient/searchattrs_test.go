package agentclient

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/internal/testenv"
)

// bareTemporal starts a dev server with no custom search attributes and
// returns a client of its default namespace.
func bareTemporal(t *testing.T) client.Client {
	t.Helper()
	srv, err := testenv.StartTemporal(t.Context(), testenv.WithoutSearchAttributes())
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	return srv.Client()
}

// newNamespace registers a namespace of its own for one case.
func newNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	_, err := c.WorkflowService().RegisterNamespace(t.Context(), &workflowservice.RegisterNamespaceRequest{
		Namespace: name, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	require.NoError(t, err)
	// A new namespace may take a moment to be known to the frontend.
	require.Eventually(t, func() bool {
		_, err := c.OperatorService().ListSearchAttributes(t.Context(), &operatorservice.ListSearchAttributesRequest{Namespace: name})
		return err == nil
	}, time.Minute, 100*time.Millisecond)
}

func customAttributes(t *testing.T, c client.Client, namespace string) map[string]enums.IndexedValueType {
	t.Helper()
	resp, err := c.OperatorService().ListSearchAttributes(t.Context(), &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	require.NoError(t, err)
	return resp.GetCustomAttributes()
}

// refusing is the real operator service, except that adding a search
// attribute is refused as Temporal Cloud refuses it.
type refusing struct {
	operatorservice.OperatorServiceClient
}

func (refusing) AddSearchAttributes(context.Context, *operatorservice.AddSearchAttributesRequest, ...grpc.CallOption) (*operatorservice.AddSearchAttributesResponse, error) {
	return nil, serviceerror.NewPermissionDenied("Request unauthorized.", "")
}

// countingLists is the real operator service, counting its listings.
type countingLists struct {
	operatorservice.OperatorServiceClient
	lists atomic.Int32
}

func (c *countingLists) ListSearchAttributes(ctx context.Context, r *operatorservice.ListSearchAttributesRequest, o ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error) {
	c.lists.Add(1)
	return c.OperatorServiceClient.ListSearchAttributes(ctx, r, o...)
}

// withOperator is an SDK client whose operator service is op.
type withOperator struct {
	client.Client
	op operatorservice.OperatorServiceClient
}

func (w withOperator) OperatorService() operatorservice.OperatorServiceClient { return w.op }

// silent never answers a listing.
type silent struct {
	operatorservice.OperatorServiceClient
}

func (silent) ListSearchAttributes(ctx context.Context, _ *operatorservice.ListSearchAttributesRequest, _ ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestRegisterSearchAttributes(t *testing.T) {
	c := bareTemporal(t)
	require.NotContains(t, customAttributes(t, c, "default"), "AlertId")

	t.Run("two workers at once", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		added := make([][]string, 2)
		for i := range errs {
			wg.Go(func() { added[i], errs[i] = RegisterSearchAttributes(t.Context(), c.OperatorService(), "default") })
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		require.NotEmpty(t, append(added[0], added[1]...), "one of them added the attributes")
		attrs := customAttributes(t, c, "default")
		require.Equal(t, enums.INDEXED_VALUE_TYPE_KEYWORD, attrs["AlertId"])
		require.Equal(t, enums.INDEXED_VALUE_TYPE_KEYWORD, attrs["Verdict"])

		again, err := RegisterSearchAttributes(t.Context(), c.OperatorService(), "default")
		require.NoError(t, err)
		require.Empty(t, again, "nothing left to add")
	})

	t.Run("refused", func(t *testing.T) {
		newNamespace(t, c, "refused")
		added, err := RegisterSearchAttributes(t.Context(), refusing{c.OperatorService()}, "refused")
		require.Empty(t, added)
		var sae *SearchAttributeError
		require.ErrorAs(t, err, &sae)
		require.Equal(t, []string{"AlertId", "Verdict"}, sae.Missing)
		require.Contains(t, sae.Reason, "does not allow registering them")
		require.Contains(t, err.Error(), "namespace refused")
		require.NotContains(t, customAttributes(t, c, "refused"), "AlertId")
	})

	t.Run("registered under another type", func(t *testing.T) {
		newNamespace(t, c, "mistyped")
		_, err := c.OperatorService().AddSearchAttributes(t.Context(), &operatorservice.AddSearchAttributesRequest{
			Namespace: "mistyped", SearchAttributes: map[string]enums.IndexedValueType{"AlertId": enums.INDEXED_VALUE_TYPE_TEXT},
		})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return customAttributes(t, c, "mistyped")["AlertId"] == enums.INDEXED_VALUE_TYPE_TEXT },
			time.Minute, 100*time.Millisecond)
		added, err := RegisterSearchAttributes(t.Context(), c.OperatorService(), "mistyped")
		require.Equal(t, []string{"Verdict"}, added, "the other one is still registered")
		var sae *SearchAttributeError
		require.ErrorAs(t, err, &sae)
		require.Equal(t, []string{"AlertId"}, sae.Missing)
		require.Equal(t, "AlertId is registered as Text, not Keyword", sae.Reason)
		require.Equal(t, enums.INDEXED_VALUE_TYPE_KEYWORD, customAttributes(t, c, "mistyped")["Verdict"])
	})

	t.Run("listed once complete", func(t *testing.T) {
		newNamespace(t, c, "listed")
		op := &countingLists{OperatorServiceClient: c.OperatorService()}
		ac, err := New(withOperator{c, op}, Options{Temporal: config.Temporal{Namespace: "listed", TaskQueue: "q"}})
		require.NoError(t, err)
		ac.LoadSearchAttributes(t.Context())
		l, err := ac.attributes(t.Context())
		require.NoError(t, err)
		require.Equal(t, []string{"AlertId", "Verdict"}, l.missing)
		require.Equal(t, int32(2), op.lists.Load(), "a listing that lacks attributes is not kept")

		_, err = RegisterSearchAttributes(t.Context(), c.OperatorService(), "listed")
		require.NoError(t, err)
		op.lists.Store(0)
		require.Eventually(t, func() bool {
			l, err := ac.attributes(t.Context())
			return err == nil && len(l.missing) == 0
		}, time.Minute, 100*time.Millisecond, "a worker registered them meanwhile")
		n := op.lists.Load()
		for range 3 {
			l, err = ac.attributes(t.Context())
			require.NoError(t, err)
			require.Equal(t, []string{"AlertId", "Verdict"}, l.registered)
		}
		require.Equal(t, n, op.lists.Load(), "a complete listing is read once")
	})

	t.Run("no answer", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		_, err := RegisterSearchAttributes(ctx, silent{c.OperatorService()}, "default")
		var sae *SearchAttributeError
		require.ErrorAs(t, err, &sae)
		require.Equal(t, "cannot list them: Temporal did not answer in time", sae.Reason)
	})
}
