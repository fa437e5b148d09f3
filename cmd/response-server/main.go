// Command response-server is a small Model Context Protocol server for the
// local stack, so that a newcomer can watch an investigation ask to act,
// approve the action and see it happen without any real infrastructure.
//
// It offers two read tools and two actions:
//
//   - lookup_host: a host from an inventory file (examples/mcp/inventory.json,
//     which matches the example alerts): addresses, owner, role, OS and
//     criticality.
//   - list_blocked: the IP addresses blocked and users disabled so far.
//   - block_ip and disable_user: append the address or user, with a UTC
//     timestamp and the reason, to blocked-ips.txt or disabled-users.txt in
//     the state directory. Their annotations say they are destructive, so the
//     worker asks an analyst before calling them; they are idempotent.
//
// Nothing leaves the machine. Every argument is treated as hostile: addresses
// are parsed with net/netip and private, loopback and other non-public ranges
// are refused (unless --allow-private), as are the inventory's own addresses;
// user names match an allow-list pattern; reasons are one bounded line. A bad
// argument is a tool error of one sentence, never a crash.
//
// It speaks MCP over standard input and output by default (the worker starts
// it as a subprocess), or over streamable HTTP at http://ADDR/mcp with --http.
// Over HTTP, clients must send "Authorization: Bearer $RESPONSE_SERVER_TOKEN"
// when that variable is set, and it must be set to listen on anything but a
// loopback address.
package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/config"
)

const (
	defaultInventory = "examples/mcp/inventory.json"
	defaultStateDir  = ".data/response"
	maxMessageBytes  = 1 << 20
	sessionIdle      = 30 * time.Minute
	shutdownGrace    = 5 * time.Second

	// tokenEnv holds the bearer token HTTP clients must send. It is read
	// from the environment only: a flag would show in the process list.
	tokenEnv = "RESPONSE_SERVER_TOKEN"
)

func main() {
	if err := newCommand(os.Stderr).Execute(); err != nil {
		os.Exit(1)
	}
}

// newCommand writes its logs and messages to errOut: in stdio mode standard
// output carries the protocol and nothing else.
func newCommand(errOut io.Writer) *cobra.Command {
	var (
		httpAddr     = config.Env("", "RESPONSE_SERVER_HTTP")
		inventory    = config.Env(defaultInventory, "RESPONSE_SERVER_INVENTORY")
		stateDir     = config.Env(defaultStateDir, "RESPONSE_SERVER_STATE_DIR")
		allowPrivate = config.Env("", "RESPONSE_SERVER_ALLOW_PRIVATE") == "true"
	)
	cmd := &cobra.Command{
		Use:          "response-server",
		Short:        "An MCP server of local response actions (look up a host, block an IP, disable a user) for the local stack",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(errOut, nil)).With("component", "response-server")
			inv, err := loadInventory(inventory)
			if err != nil {
				return err
			}
			st, err := newStore(stateDir)
			if err != nil {
				return err
			}
			srv := newServer(&responder{inv: inv, store: st, opts: options{allowPrivate: allowPrivate}, log: log})
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if httpAddr == "" {
				log.Info("serving MCP over stdio", "inventory", inventory, "hosts", len(inv.hosts), "state_dir", stateDir)
				return serveStdio(ctx, srv)
			}
			return serveHTTP(ctx, srv, httpAddr, os.Getenv(tokenEnv), errOut, log)
		},
	}
	cmd.SetErr(errOut)
	f := cmd.Flags()
	f.StringVar(&httpAddr, "http", httpAddr, "serve streamable HTTP at http://ADDR/mcp instead of stdio, e.g. 127.0.0.1:8096 (env RESPONSE_SERVER_HTTP)")
	f.StringVar(&inventory, "inventory", inventory, "JSON inventory of hosts (env RESPONSE_SERVER_INVENTORY)")
	f.StringVar(&stateDir, "state-dir", stateDir, "directory for blocked-ips.txt and disabled-users.txt (env RESPONSE_SERVER_STATE_DIR)")
	f.BoolVar(&allowPrivate, "allow-private", allowPrivate, "allow block_ip on loopback, private, link-local and other non-public addresses (env RESPONSE_SERVER_ALLOW_PRIVATE=true)")
	return cmd
}

func serveStdio(ctx context.Context, srv *mcp.Server) error {
	err := srv.Run(ctx, &mcp.StdioTransport{MaxLineLength: maxMessageBytes})
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("the MCP session over stdio ended: %w", err)
	}
	return nil
}

func serveHTTP(ctx context.Context, srv *mcp.Server, addr, token string, errOut io.Writer, log *slog.Logger) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", addr, err)
	}
	// Without a token anyone who can reach the port could block addresses
	// and disable users, so only this machine may, unless a token is set.
	if ta, ok := l.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() && token == "" {
		l.Close()
		return fmt.Errorf("%s is not a loopback address: set %s to a bearer token that clients must send, or listen on 127.0.0.1", addr, tokenEnv)
	}
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		SessionTimeout:      sessionIdle,
		MaxRequestBodyBytes: maxMessageBytes,
		Logger:              log,
	})
	if token != "" {
		h = requireBearer(token, h)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	// Cancelling the base context ends the long-lived event streams, which
	// Shutdown alone would wait for.
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	fmt.Fprintf(errOut, "response-server: serving MCP at http://%s/mcp\n", l.Addr())
	done := make(chan error, 1)
	go func() { done <- hs.Serve(l) }()
	select {
	case err := <-done:
		return fmt.Errorf("the HTTP server stopped: %w", err)
	case <-ctx.Done():
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer scancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	<-done
	fmt.Fprintln(errOut, "response-server: stopped")
	return nil
}

// requireBearer answers 401 unless the request carries the token.
func requireBearer(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
