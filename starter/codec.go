package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/agentclient"
	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/payloadcodec"
)

func (a *app) codecServerCommand() *cobra.Command {
	var (
		listen  string
		origins []string
		token   string
	)
	cmd := &cobra.Command{
		Use:   "codec-server",
		Short: "Decrypt encrypted history for the Temporal Web UI and CLI (remote codec HTTP API)",
		Long: `With --payload-key-file (or PAYLOAD_KEY_FILE), everything the investigation
stores in Temporal history is encrypted. This server decrypts it for the
Temporal Web UI and CLI, which call POST /decode and /encode (also under
/{namespace}/). Point the UI at it: locally 'temporal server start-dev
--ui-codec-endpoint http://127.0.0.1:8234' (the stack does this), on Temporal
Cloud the namespace's Codec Server setting.

The token (--token, better CODEC_SERVER_TOKEN: flags show in the process
list) comes as "Authorization: Bearer TOKEN" (the CLI's --codec-auth) or as
the password of HTTP Basic authentication (a browser, after its user signed
in at http://LISTEN/). With a token, every request needs it (the UI's
"Include cross-origin credentials" sends it once the browser signed in).
Without one, /encode is off and, on a loopback address only, the Web UI
from --web-ui-origin (default the origin of --ui-url) may decode: so may
any process on this machine that writes that Origin header. Listening on
any other address needs a token.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keys, err := agentclient.PayloadKeys(a.temporal)
			if err != nil {
				return err
			}
			if keys == nil {
				return errors.New("the codec server needs the payload key file: set --payload-key-file or PAYLOAD_KEY_FILE")
			}
			if !cmd.Flags().Changed("token") {
				// Read here, not as the flag's default, which --help prints.
				token = config.Env("", "CODEC_SERVER_TOKEN")
			}
			logger := a.logger()
			if w := keys.Warning(); w != "" {
				logger.Warn(w)
			}
			if !cmd.Flags().Changed("web-ui-origin") {
				origins = []string{originOf(a.temporal.UIURL)}
			}
			for _, o := range origins {
				if u, err := url.Parse(o); err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") {
					return fmt.Errorf("--web-ui-origin %q is not an origin like http://localhost:8233", o)
				}
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("codec server cannot listen on %s: %v", listen, err)
			}
			loopback := isLoopback(ln.Addr())
			if !loopback && token == "" {
				ln.Close()
				return fmt.Errorf("the codec server listens on %s, which is not a loopback address, so it needs a token: set CODEC_SERVER_TOKEN (or --token), or listen on 127.0.0.1", ln.Addr())
			}
			srv := payloadcodec.NewServer(payloadcodec.ServerOptions{
				Codec:     payloadcodec.NewCodec(keys),
				Namespace: a.temporal.Namespace,
				Origins:   origins,
				Token:     token,
				Loopback:  loopback,
				Logger:    logger,
			})
			auth := "no token: the Web UI's origin may decode, nothing else"
			if token != "" {
				auth = "token required for every request"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Codec server on http://%s for namespace %s: keys %s (encrypts with %s), Web UI origin %s, %s\n",
				ln.Addr(), a.temporal.Namespace, strings.Join(keys.IDs(), ", "), keys.EncryptKeyID(), strings.Join(origins, ", "), auth)
			return serveUntilDone(cmd.Context(), ln, srv)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", config.Env("127.0.0.1:8234", "CODEC_SERVER_LISTEN"), "host:port to listen on (env CODEC_SERVER_LISTEN)")
	cmd.Flags().StringSliceVar(&origins, "web-ui-origin", nil, "browser origin(s) of the Temporal Web UI allowed by CORS (default: the origin of --ui-url, http://localhost:8233)")
	cmd.Flags().StringVar(&token, "token", "", "the shared secret requests present, as Authorization: Bearer TOKEN or as the HTTP Basic password (env CODEC_SERVER_TOKEN); needed to encode, and for any listen address that is not loopback")
	return cmd
}

// originOf is scheme://host[:port] of a URL.
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return strings.TrimRight(raw, "/")
	}
	return u.Scheme + "://" + u.Host
}

// isLoopback says whether a listener's address accepts loopback
// connections only (127.0.0.0/8, ::1; not 0.0.0.0 or ::).
func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// serveUntilDone serves until ctx ends (Ctrl-C, SIGTERM), then lets requests
// in flight finish for up to 5 s.
func serveUntilDone(ctx context.Context, ln net.Listener, srv *http.Server) error {
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("codec server stopped: %v", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}
