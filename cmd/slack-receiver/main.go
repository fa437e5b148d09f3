// Command slack-receiver stands in for Slack's incoming webhooks on the
// local stack: point the worker's SLACK_WEBHOOK_URL at it
// (http://ADDR/services/local) and every verdict the intake delivers is
// kept. GET /messages returns them as JSON (newest last); each one is also
// printed to standard output, one line of its notification text. Like
// Slack, it refuses text over Block Kit's bounds (400 invalid_blocks). It
// keeps the latest 500 messages in memory; nothing is forwarded anywhere.
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
	"unicode/utf8"

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
	if overLimits(msg.Blocks) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, "invalid_blocks")
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

// overLimits says whether blocks break Slack's bounds on text, which Slack
// refuses with 400 invalid_blocks: 150 characters in a header, 2,000 in a
// section's field, 75 in a button, 3,000 in any other text.
func overLimits(blocks []json.RawMessage) bool {
	type text struct {
		Text string `json:"text"`
	}
	over := func(t text, n int) bool { return utf8.RuneCountInString(t.Text) > n }
	for _, raw := range blocks {
		var b struct {
			Type     string `json:"type"`
			Text     text   `json:"text"`
			Fields   []text `json:"fields"`
			Elements []struct {
				Type string          `json:"type"`
				Text json.RawMessage `json:"text"`
			} `json:"elements"`
		}
		if json.Unmarshal(raw, &b) != nil {
			return true
		}
		if b.Type == "header" && over(b.Text, 150) || over(b.Text, 3000) {
			return true
		}
		for _, f := range b.Fields {
			if over(f, 2000) {
				return true
			}
		}
		for _, e := range b.Elements {
			var t text // a button's text is an object, a context element's a string
			if json.Unmarshal(e.Text, &t) != nil {
				_ = json.Unmarshal(e.Text, &t.Text)
			}
			if e.Type == "button" && over(t, 75) || over(t, 3000) {
				return true
			}
		}
	}
	return false
}

func (r *receiver) list(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	kept := append([]json.RawMessage{}, r.kept...)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(kept)
}
