package source

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/secops-agent/investigator/intake"
)

// HTTP is the intake's webhook: POST /v1/alerts with a bearer token, one
// alert (or envelope) per request, at most 1 MiB of alert. It answers
//   - 202 with the alert ID and identity, once the alert is stored and its
//     outcome recorded, whatever the outcome (Accepted);
//   - 400 with the reason for a malformed or oversized alert;
//   - 401 without the right token;
//   - 429 with Retry-After when it sheds load (more requests in flight
//     than MaxInFlight, more decoded alert bytes in flight than
//     MaxDecodedInFlight, or a full waiting room);
//   - 503 with Retry-After when Firestore or Temporal cannot be reached.
type HTTP struct {
	// Token is the bearer token callers must present.
	Token       string
	Pipeline    *Pipeline
	MaxInFlight int
	// MaxDecodedInFlight bounds the decoded bytes of the alerts in flight
	// (DefaultDecodedInFlight when 0): MaxInFlight alone lets each hold
	// up to 8 MiB.
	MaxDecodedInFlight int64
	Log                *slog.Logger

	inFlight   atomic.Int64
	budgetOnce sync.Once
	budget     *budget
}

// Accepted is the body of a 202 answer. It holds only what the caller's
// own alert determines: the outcome and workflow ID would tell a token
// holder whether an identity was investigated already, or the workflow ID
// (and so the identity) of another investigation its indicators joined.
// A sender needs only to know the alert is safe to stop sending, which
// 202 says alike for a new alert and a retry; the outcome is in the log
// and `starter intake status` (design/intake.md, step 7).
type Accepted struct {
	AlertID  string `json:"alert_id"`
	Identity string `json:"identity"`
	Message  string `json:"message"`
}

// acceptedMessage is every 202's sentence.
const acceptedMessage = "the alert is stored and admitted; a retry of it is not investigated twice"

// Refused is the body of every other answer.
type Refused struct {
	Error string `json:"error"`
}

// Handler serves POST /v1/alerts.
func (h *HTTP) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/alerts", h.alerts)
	return mux
}

func (h *HTTP) alerts(w http.ResponseWriter, r *http.Request) {
	if !h.authorised(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="intake"`)
		reply(w, http.StatusUnauthorized, Refused{"a bearer token is required (Authorization: Bearer TOKEN, the token of --token-file)"})
		return
	}
	if n := h.inFlight.Add(1); h.MaxInFlight > 0 && n > int64(h.MaxInFlight) {
		h.inFlight.Add(-1)
		w.Header().Set("Retry-After", "1")
		reply(w, http.StatusTooManyRequests, Refused{"too many alerts in flight: send it again after Retry-After"})
		return
	}
	defer h.inFlight.Add(-1)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, intake.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		reply(w, http.StatusBadRequest, Refused{intake.ErrTooLarge.Error()})
		return
	case err != nil:
		reply(w, http.StatusBadRequest, Refused{"the request body could not be read"})
		return
	}
	h.budgetOnce.Do(func() { h.budget = newBudget(h.MaxDecodedInFlight) })
	res := h.Pipeline.take(r.Context(), body, func(weight int) (func(), error) {
		return h.budget.acquire(r.Context(), weight, 0)
	})
	switch {
	case res.Invalid != nil:
		reply(w, http.StatusBadRequest, Refused{res.Invalid.Error()})
	case res.Busy != nil:
		w.Header().Set("Retry-After", "1")
		reply(w, http.StatusTooManyRequests, Refused{res.Busy.Error()})
	case res.Retry != nil:
		h.Log.Warn("webhook alert not taken", "error", res.Retry)
		w.Header().Set("Retry-After", "5")
		reply(w, http.StatusServiceUnavailable, Refused{res.Retry.Error() + "; send it again later"})
	case res.RetryAfter > 0:
		w.Header().Set("Retry-After", strconv.Itoa(int((res.RetryAfter+time.Second-1)/time.Second)))
		reply(w, http.StatusTooManyRequests, Refused{res.Outcome.Message})
	default:
		h.Log.Info("alert taken", "alert_id", res.Alert.ID, "envelopes", res.Envelopes, "identity", res.Identity.Key, "outcome", res.Outcome.Kind, "workflow_id", res.Outcome.WorkflowID)
		reply(w, http.StatusAccepted, Accepted{AlertID: res.Alert.ID, Identity: res.Identity.Key, Message: acceptedMessage})
	}
}

// authorised compares the bearer token in constant time.
func (h *HTTP) authorised(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || h.Token == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(h.Token)) == 1
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
