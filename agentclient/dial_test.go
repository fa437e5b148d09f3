package agentclient

import (
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/internal/testenv"
)

// TestDialUnreachable: a Temporal that is not there is one sentence, not
// the gRPC resolver's and transport's text ("failed reaching server:
// connection error: desc = ...", "no children to pick from").
func TestDialUnreachable(t *testing.T) {
	port, err := testenv.FreePort()
	require.NoError(t, err)
	refused := fmt.Sprintf("127.0.0.1:%d", port)
	// A listener that closes every connection at once: not a gRPC server.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, addr := range []string{refused, "nosuchhost.invalid:7233", ln.Addr().String()} {
		_, err := Dial(Options{Temporal: config.Temporal{Address: addr, Namespace: "ns"}})
		require.EqualError(t, err, "cannot connect to Temporal at "+addr+" (namespace ns): nothing answered; is the server running?")
		require.True(t, IsUnavailable(err))
	}
}
