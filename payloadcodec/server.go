package payloadcodec

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/secops-agent/investigator/internal/clip"
)

// maxRequestBytes bounds a request body: Temporal caps one payload at 2 MB,
// and the Web UI sends a page of them at once.
const maxRequestBytes = 32 << 20

// The codec server's connection limits (NewServer): a client that sends its
// headers or body slowly, reads the answer slowly or keeps an idle
// connection open is cut off instead of holding a connection for good.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = time.Minute // a 32 MiB body over a slow link
	writeTimeout      = time.Minute
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
)

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
	// Token is the shared secret a request presents as "Authorization:
	// Bearer TOKEN" (the Temporal CLI's --codec-auth, the SDK's remote
	// codec) or as the password of HTTP Basic authentication (what a
	// browser sends once its user signed in at the server's address).
	// When set, every request needs it: an Origin header proves nothing
	// (every non-browser client can write it). Empty: /encode is disabled,
	// and only Loopback lets anything decode.
	Token string
	// Loopback says the server listens on loopback addresses only. Then,
	// without a Token, a request from an allowed Origin (the Web UI in a
	// browser on this machine) may decode: anything on this machine that
	// writes that header may, which a Token closes.
	Loopback bool
	// Logger receives one line per refused or failed request.
	Logger *slog.Logger
}

// NewServer is the codec server: NewHandler behind read, write and idle
// timeouts and a header size limit.
func NewServer(o ServerOptions) *http.Server {
	return &http.Server{
		Handler:           NewHandler(o),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// NewHandler serves Temporal's remote codec protocol: POST /encode and
// POST /decode with protojson Payloads (Content-Type application/json),
// also under a namespace prefix (/{namespace}/decode), with CORS for the
// allowed origins only, and the token rules of ServerOptions. GET / is
// where a browser signs in with the token (HTTP Basic). The payload work is
// converter.NewPayloadCodecHTTPHandler's.
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
			if origin == "" {
				rec.fail(http.StatusForbidden, "a CORS preflight needs an allowed Origin")
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		authorized := o.Token != "" && tokenMatches(r, token)
		if r.URL.Path == "/" && r.Method == http.MethodGet {
			signIn(rec, o.Token != "", authorized)
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
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			// A browser sends a cross-origin form or text/plain POST without
			// asking first; JSON needs a preflight, which the origin check
			// answers.
			rec.fail(http.StatusUnsupportedMediaType, "the body must be JSON (Content-Type: application/json)")
			return
		}
		switch {
		case authorized:
		case o.Token == "" && op == "encode":
			rec.fail(http.StatusForbidden, "encoding is disabled: start the codec server with a token (--token or CODEC_SERVER_TOKEN)")
			return
		case op == "decode" && o.Loopback && origin != "" && o.Token == "":
			// The Web UI in a browser on this machine, or anything there
			// that writes its origin: with a token, it must send it too.
		default:
			challenge(w)
			rec.fail(http.StatusUnauthorized, "missing or wrong token")
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
		if c, ok := o.Codec.(*Codec); ok && cmp.Or(ns, o.Namespace) != "" {
			// Bind what it encodes to the namespace, and refuse to decode
			// what is bound to another one.
			converter.NewPayloadCodecHTTPHandler(c.ForNamespace(cmp.Or(ns, o.Namespace))).ServeHTTP(w, r)
			return
		}
		codec.ServeHTTP(w, r)
	})
}

// challenge names both ways to present the token: Bearer for programs, Basic
// so that a browser opening GET / asks its user for it.
func challenge(w http.ResponseWriter) {
	w.Header().Add("WWW-Authenticate", `Bearer realm="codec"`)
	w.Header().Add("WWW-Authenticate", `Basic realm="codec", charset="UTF-8"`)
}

// signIn answers GET /: a browser that opens it asks for the token (any user
// name, the token as password) and from then on sends it with every request
// to this server that carries credentials, such as the Web UI's decode calls
// with "Include cross-origin credentials" on.
func signIn(rec *statusRecorder, hasToken, authorized bool) {
	switch {
	case !hasToken:
		rec.fail(http.StatusNotFound, "this codec server has no token to sign in with")
	case !authorized:
		challenge(rec)
		rec.fail(http.StatusUnauthorized, "sign in with any user name and the codec server's token as the password")
	default:
		rec.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = rec.Write([]byte("Signed in: this browser now sends the token to the codec server with requests that include credentials (the Web UI's \"Include cross-origin credentials\").\n"))
	}
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

// tokenMatches reads the token from "Authorization: Bearer TOKEN" or from
// the password of Basic authentication, and compares in constant time, over
// hashes so that the length of the token does not leak either.
func tokenMatches(r *http.Request, want [sha256.Size]byte) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		if _, got, ok = r.BasicAuth(); !ok {
			return false
		}
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
