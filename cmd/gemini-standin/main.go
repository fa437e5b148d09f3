// Command gemini-standin serves the offline demo (gemini/standin) on a real
// listener: a deterministic stand-in for the Gemini API that runs a scripted
// investigation, so the whole system can be demonstrated without a Gemini
// key. Point the SDK at it with GOOGLE_GEMINI_BASE_URL=http://ADDR (any API
// key value works).
package main

import (
	"context"
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

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/gemini/standin"
)

const (
	defaultAddr = "127.0.0.1:8089"
	addrEnv     = "GEMINI_STANDIN_ADDR"
)

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	slog.SetDefault(logger)
	if err := newRootCmd(os.Stdout, logger).Execute(); err != nil {
		// cobra has already printed the error.
		os.Exit(1)
	}
}

func newRootCmd(out io.Writer, logger *slog.Logger) *cobra.Command {
	addr := os.Getenv(addrEnv)
	if addr == "" {
		addr = defaultAddr
	}
	cmd := &cobra.Command{
		Use:   "gemini-standin",
		Short: "Serve a deterministic offline stand-in for the Gemini API",
		Long: "gemini-standin answers Gemini REST requests (generateContent, batchEmbedContents, embedContent)\n" +
			"with plausible, deterministic replies for each phase of the investigation agent,\n" +
			"so the system runs end to end without a Gemini key. Set GOOGLE_GEMINI_BASE_URL to its URL.",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: false,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serve(ctx, addr, out, logger)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", addr, "listen address host:port (env "+addrEnv+")")
	return cmd
}

// serve listens on addr and answers with the stand-in until ctx is done.
func serve(ctx context.Context, addr string, out io.Writer, logger *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	demo := standin.Handler()
	handler := func(r *geminitest.Request) geminitest.Reply {
		reply := demo(r)
		status := reply.Status
		if status == 0 {
			status = http.StatusOK
		}
		logger.Info("gemini request", "method", r.Method, "model", r.Model, "phase", r.Phase(), "status", status)
		return reply
	}
	srv := &http.Server{
		Handler:           withErrorLog(geminitest.NewHTTPHandler(handler), logger),
		ReadHeaderTimeout: 10 * time.Second,
	}
	fmt.Fprintf(out, "Gemini stand-in listening on http://%s (set GOOGLE_GEMINI_BASE_URL to this)\n", ln.Addr())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// withErrorLog logs requests answered with an error status: those the Gemini
// handler rejects (wrong path or method, unparsable body) never reach the
// stand-in.
func withErrorLog(next http.Handler, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status >= 400 {
			logger.Warn("rejected request", "http_method", r.Method, "path", r.URL.Path, "status", rec.status)
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
