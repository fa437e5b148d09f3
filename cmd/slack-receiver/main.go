// Command slack-receiver stands in for Slack's incoming webhooks on the
// local stack: point the worker's SLACK_WEBHOOK_URL at it
// (http://ADDR/services/local) and every verdict the intake delivers is
// kept. GET /messages returns them as JSON (newest last); each one is also
// printed to standard output, one line of its notification text. It keeps
// the latest 500 messages in memory; nothing is forwarded anywhere.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/secops-agent/investigator/internal/termtext"
)

const (
	defaultAddr = "127.0.0.1:8095"
	maxKept     = 500
	maxBody     = 1 << 20
)

func main() {
	if err := newCommand(os.Stdout).Execute(); err != nil {
		os.Exit(1)
	}
}

func newCommand(out io.Writer) *cobra.Command {
	addr := defaultAddr
	if v := os.Getenv("SLACK_RECEIVER_ADDR"); v != "" {
		addr = v
	}
	cmd := &cobra.Command{
		Use:          "slack-receiver",
		Short:        "Keep the Slack messages the intake delivers, for the local stack (GET /messages)",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "slack-receiver: SLACK_WEBHOOK_URL=http://%s/services/local; messages at http://%s/messages\n", l.Addr(), l.Addr())
			srv := &http.Server{Handler: newReceiver(out).handler(), ReadHeaderTimeout: 10 * time.Second}
			go func() { <-ctx.Done(); _ = srv.Shutdown(context.Background()) }()
			if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", addr, "address to listen on (env SLACK_RECEIVER_ADDR)")
	return cmd
}

// receiver keeps the messages posted to it.
type receiver struct {
	mu   sync.Mutex
	kept []json.RawMessage
	out  io.Writer
}

func newReceiver(out io.Writer) *receiver { return &receiver{out: termtext.NewWriter(out)} }

func (r *receiver) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /", r.post)
	mux.HandleFunc("GET /messages", r.list)
	return mux
}

// post answers as Slack does: "ok", or 400 "invalid_payload".
func (r *receiver) post(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxBody))
	var msg struct {
		Text   string            `json:"text"`
		Blocks []json.RawMessage `json:"blocks"`
	}
	if err != nil || json.Unmarshal(body, &msg) != nil || (msg.Text == "" && len(msg.Blocks) == 0) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, "invalid_payload")
		return
	}
	r.mu.Lock()
	r.kept = append(r.kept, body)
	if len(r.kept) > maxKept {
		r.kept = r.kept[len(r.kept)-maxKept:]
	}
	r.mu.Unlock()
	fmt.Fprintf(r.out, "%s %s\n", time.Now().UTC().Format(time.TimeOnly), termtext.Line(msg.Text))
	_, _ = io.WriteString(w, "ok")
}

func (r *receiver) list(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	kept := append([]json.RawMessage{}, r.kept...)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(kept)
}
