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
/{namespace}/) from the analyst's browser. Point the UI at it: locally
'temporal server start-dev --ui-codec-endpoint http://127.0.0.1:8234' (the
stack does this), on Temporal Cloud the namespace's Codec Server setting.

The Web UI origin is allowed by CORS (--web-ui-origin, default the origin of
--ui-url). With --token (or CODEC_SERVER_TOKEN, preferred: flags show in the
process list) every request must carry "Authorization: Bearer TOKEN"; the CLI
sends it with --codec-auth, the Web UI cannot send a shared token.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keys, err := agentclient.PayloadKeys(a.temporal)
			if err != nil {
				return err
			}
			if keys == nil {
				return errors.New("the codec server needs the payload key file: set --payload-key-file or PAYLOAD_KEY_FILE")
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
			handler := payloadcodec.NewHandler(payloadcodec.ServerOptions{
				Codec:     payloadcodec.NewCodec(keys),
				Namespace: a.temporal.Namespace,
				Origins:   origins,
				Token:     token,
				Logger:    logger,
			})
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("codec server cannot listen on %s: %v", listen, err)
			}
			auth := "no token (anyone who reaches the port can decode)"
			if token != "" {
				auth = "bearer token required"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Codec server on http://%s for namespace %s: keys %s (encrypts with %s), Web UI origin %s, %s\n",
				ln.Addr(), a.temporal.Namespace, strings.Join(keys.IDs(), ", "), keys.EncryptKeyID(), strings.Join(origins, ", "), auth)
			return serveUntilDone(cmd.Context(), ln, handler)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", config.Env("127.0.0.1:8234", "CODEC_SERVER_LISTEN"), "host:port to listen on (env CODEC_SERVER_LISTEN)")
	cmd.Flags().StringSliceVar(&origins, "web-ui-origin", nil, "browser origin(s) of the Temporal Web UI allowed by CORS (default: the origin of --ui-url, http://localhost:8233)")
	cmd.Flags().StringVar(&token, "token", config.Env("", "CODEC_SERVER_TOKEN"), "require Authorization: Bearer TOKEN (env CODEC_SERVER_TOKEN)")
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

// serveUntilDone serves until ctx ends (Ctrl-C, SIGTERM), then lets requests
// in flight finish for up to 5 s.
func serveUntilDone(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
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
