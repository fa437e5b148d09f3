package agentclient

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

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

// TestDialTLSFailure: TLS on against a plaintext server (TEMPORAL_API_KEY
// set against the dev server), or against a server whose certificate is
// not trusted, says TLS failed and why, not "nothing answered".
func TestDialTLSFailure(t *testing.T) {
	// A plaintext gRPC server, as the dev server is.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	plain := grpc.NewServer()
	go plain.Serve(ln)
	t.Cleanup(plain.Stop)
	// A TLS server with a certificate no one trusts.
	untrusted := httptest.NewUnstartedServer(http.NotFoundHandler())
	untrusted.EnableHTTP2 = true
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // its side of the refused handshakes
	untrusted.StartTLS()
	t.Cleanup(untrusted.Close)

	for addr, want := range map[string]string{
		ln.Addr().String():                 "TLS failed: the server does not speak TLS (TLS is on because of --temporal-tls, TEMPORAL_TLS, TEMPORAL_API_KEY or a client certificate; a local dev server has no TLS)",
		untrusted.Listener.Addr().String(): "TLS failed: the server's certificate is not trusted (an unknown authority, another host name, or expired)",
	} {
		_, err := Dial(Options{Temporal: config.Temporal{Address: addr, Namespace: "ns", TLS: true}})
		require.EqualError(t, err, "cannot connect to Temporal at "+addr+" (namespace ns): "+want)
		require.True(t, IsUnavailable(err))
	}
	// The API key turns TLS on.
	t.Setenv("TEMPORAL_API_KEY", "key")
	_, err = Dial(Options{Temporal: config.Temporal{Address: ln.Addr().String(), Namespace: "ns"}})
	require.ErrorContains(t, err, "TLS failed: the server does not speak TLS")
}
