package main

import (
	"io"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/otlptest"
)

// TestCommandTelemetry: with an OTLP endpoint set, a command is one root
// span named after it, failed without its error's text; a command that is
// a service of its own exports under its name, with no root span, the
// spans it starts itself.
func TestCommandTelemetry(t *testing.T) {
	rcv, err := otlptest.Start()
	require.NoError(t, err)
	defer rcv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.HTTPEndpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_SDK_DISABLED", "")

	run := func(args ...string) error {
		a := &app{}
		root := newRootApp(a, io.Discard)
		root.AddCommand(&cobra.Command{Use: "svc", Annotations: map[string]string{serviceAnnotation: "investigator-intake"},
			RunE: func(cmd *cobra.Command, _ []string) error {
				_, end := a.tel.Span(cmd.Context(), "intake alert")
				end(false)
				return nil
			}})
		root.SetArgs(args)
		root.SetErr(io.Discard)
		err := root.ExecuteContext(testCtx(t))
		a.endTelemetry(err != nil)
		return err
	}
	require.Error(t, run("status", "investigation-x", "--temporal-address", "127.0.0.1:1", "--call-timeout", "2s"))
	require.NoError(t, run("svc"))

	spans := rcv.Spans()
	require.Len(t, spans, 2)
	status, alert := spans[0], spans[1]
	require.Equal(t, "starter status", status.Name)
	require.Equal(t, "investigator-starter", status.Service)
	require.Empty(t, status.ParentID)
	require.EqualValues(t, 2, status.Status, "error")
	require.Equal(t, "failed", status.Message)
	require.Equal(t, "intake alert", alert.Name)
	require.Equal(t, "investigator-intake", alert.Service)
}

// TestIntakeIsAServiceOfItsOwn: `starter intake` exports as
// investigator-intake with a span per alert; its subcommands are ordinary
// commands under a root span.
func TestIntakeIsAServiceOfItsOwn(t *testing.T) {
	root := newRootApp(&app{}, io.Discard)
	intake, _, err := root.Find([]string{"intake"})
	require.NoError(t, err)
	require.Equal(t, "investigator-intake", intake.Annotations[serviceAnnotation])
	status, _, err := root.Find([]string{"intake", "status"})
	require.NoError(t, err)
	require.Empty(t, status.Annotations[serviceAnnotation])
}
