package payloadcodec

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/secops-agent/investigator/internal/clip"
)

// maxRequestBytes bounds a request body: Temporal caps one payload at 2 MB,
// and the Web UI sends a page of them at once.
const maxRequestBytes = 32 << 20

// ServerOptions configures the codec server's HTTP handler.
type ServerOptions struct {
	// Codec encodes and decodes; its key ring decides what can be read.
	Codec converter.PayloadCodec
	// Namespace is the one namespace served: a request naming another (in
	// its path or X-Namespace header) is refused. Empty serves any.
	Namespace string
	// Origins are the browser origins allowed by CORS, e.g. the Web UI's
	// http://localhost:8233.
	Origins []string
	// Token, when set, must come as "Authorization: Bearer TOKEN".
	Token string
	// Logger receives one line per refused or failed request.
	Logger *slog.Logger
}

// NewHandler serves Temporal's remote codec protocol: POST /encode and
// POST /decode with protojson Payloads, also under a namespace prefix
// (/{namespace}/decode), with CORS for the Web UI and an optional bearer
// token. The payload work is converter.NewPayloadCodecHTTPHandler's.
func NewHandler(o ServerOptions) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	allowed := map[string]bool{}
	for _, origin := range o.Origins {
		allowed[strings.TrimRight(origin, "/")] = true
	}
	codec := converter.NewPayloadCodecHTTPHandler(o.Codec)
	var token [sha256.Size]byte
	if o.Token != "" {
		token = sha256.Sum256([]byte(o.Token))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		defer func() {
			if rec.status >= 400 {
				o.Logger.Warn("codec server refused a request", "method", r.Method, "path", r.URL.Path,
					"status", rec.status, "reason", rec.reason, "origin", r.Header.Get("Origin"), "took", time.Since(start).Round(time.Millisecond))
			}
		}()
		w = rec
		origin := r.Header.Get("Origin")
		if origin != "" {
			if !allowed[origin] {
				rec.fail(http.StatusForbidden, "origin "+origin+" is not allowed (see --web-ui-origin)")
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			h := w.Header()
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		ns, op, ok := route(r.URL.Path)
		if !ok {
			rec.fail(http.StatusNotFound, "not a codec endpoint: use POST /encode or /decode, optionally under /{namespace}/")
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST, OPTIONS")
			rec.fail(http.StatusMethodNotAllowed, op+" takes POST")
			return
		}
		if o.Token != "" && !bearerMatches(r.Header.Get("Authorization"), token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="codec"`)
			rec.fail(http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		if hdr := r.Header.Get("X-Namespace"); hdr != "" && ns == "" {
			ns = hdr
		}
		if o.Namespace != "" && ns != "" && ns != o.Namespace {
			rec.fail(http.StatusNotFound, "this codec server serves namespace "+o.Namespace+", not "+ns)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
		codec.ServeHTTP(w, r)
	})
}

// route splits /encode, /decode, /{namespace}/encode and /{namespace}/decode.
func route(path string) (namespace, op string, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	op = parts[len(parts)-1]
	if op != "encode" && op != "decode" {
		return "", "", false
	}
	switch len(parts) {
	case 1:
		return "", op, true
	case 2:
		return parts[0], op, parts[0] != ""
	}
	return "", "", false
}

// bearerMatches compares in constant time, over hashes so that the length
// of the token does not leak either.
func bearerMatches(header string, want [sha256.Size]byte) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

// statusRecorder remembers the status for the log line.
type statusRecorder struct {
	http.ResponseWriter
	status int
	reason string
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Write keeps the start of an error body (the codec's one-sentence reason)
// for the log line.
func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status >= 400 && s.reason == "" {
		s.reason = clip.String(strings.TrimSpace(string(b)), 300)
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) fail(code int, reason string) {
	s.reason = reason
	http.Error(s, reason, code)
}
