// Package geminitest is a local HTTP server that speaks enough of the Gemini
// REST protocol for the real google.golang.org/genai client to run against
// it: point the SDK at Server.URL with GOOGLE_GEMINI_BASE_URL or
// gemini.Config.BaseURL.
//
// Supported paths (any prefix before "models/" is accepted, so Vertex AI
// paths such as /v1beta1/projects/P/locations/L/publishers/google/models/M
// work too):
//
//	POST .../models/{model}:generateContent
//	POST .../models/{model}:streamGenerateContent   (one SSE event)
//	POST .../models/{model}:batchEmbedContents      → {"embeddings":[{"values":[...]}]}
//	POST .../models/{model}:embedContent            → {"embedding":{"values":[...]}}
//	POST .../models/{model}:predict                 → {"predictions":[{"embeddings":{"values":[...]}}]}
//
// A Handler decides the Reply for each parsed Request. Script replays a list
// of handlers in order and Always repeats one reply; the offline demo's
// scripted investigation is a Handler of its own (gemini/standin).
package geminitest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
)

// Methods recognised in the request path.
const (
	MethodGenerateContent       = "generateContent"
	MethodStreamGenerateContent = "streamGenerateContent"
	MethodBatchEmbedContents    = "batchEmbedContents"
	MethodEmbedContent          = "embedContent"
	MethodPredict               = "predict"
)

// maxBody bounds a request body.
const maxBody = 32 << 20

// Handler returns the reply to one request. It may be called concurrently.
type Handler func(*Request) Reply

// Server is an httptest server answering with a Handler and recording every
// request. It is safe for concurrent requests.
type Server struct {
	// URL is the base URL to give the SDK, without a trailing slash.
	URL string

	srv      *httptest.Server
	mu       sync.Mutex
	requests []*Request
}

// NewServer starts a server that answers with h.
func NewServer(h Handler) *Server {
	s := &Server{}
	s.srv = httptest.NewServer(&httpHandler{h: h, record: s.record})
	s.URL = s.srv.URL
	return s
}

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// Requests returns all requests received so far, in arrival order,
// including those rejected as malformed. A request is recorded before its
// handler runs.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func (s *Server) record(r *Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r)
	s.mu.Unlock()
}

// NewHTTPHandler returns an http.Handler that parses Gemini requests and
// answers with h, for serving on a listener of one's own (see
// cmd/gemini-standin). It records nothing.
func NewHTTPHandler(h Handler) http.Handler {
	return &httpHandler{h: h}
}

type httpHandler struct {
	h      Handler
	record func(*Request)
}

func (hh *httpHandler) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	body, err := io.ReadAll(io.LimitReader(hr.Body, maxBody+1))
	if err != nil {
		writeReply(w, hr, nil, Error(http.StatusBadRequest, "geminitest: cannot read request body: "+err.Error(), ""))
		return
	}
	req := &Request{
		Path:   hr.URL.Path,
		Header: hr.Header.Clone(),
		Body:   body,
		APIKey: hr.Header.Get("x-goog-api-key"),
	}
	if req.APIKey == "" {
		req.APIKey = hr.URL.Query().Get("key")
	}
	req.Model, req.Method = splitPath(hr.URL.Path)

	var reply *Reply
	reject := func(r Reply) { reply = &r }
	switch {
	case hr.Method != http.MethodPost:
		reject(Error(http.StatusMethodNotAllowed, fmt.Sprintf("geminitest: %s %s is not supported; only POST", hr.Method, hr.URL.Path), ""))
	case len(body) > maxBody:
		reject(Error(http.StatusRequestEntityTooLarge, "geminitest: request body too large", ""))
	case req.Model == "" || !knownMethod(req.Method):
		reject(Error(http.StatusNotFound, fmt.Sprintf("geminitest: unsupported path %q; want .../models/{model}:generateContent, :streamGenerateContent, :batchEmbedContents, :embedContent or :predict", hr.URL.Path), ""))
	default:
		if err := req.parseBody(); err != nil {
			reject(Error(http.StatusBadRequest, "geminitest: invalid request body: "+err.Error(), ""))
		} else if hh.h == nil {
			reject(Error(http.StatusInternalServerError, "geminitest: no handler", ""))
		}
	}
	// Record in arrival order, before the handler runs.
	if hh.record != nil {
		hh.record(req)
	}
	if reply == nil {
		r := hh.h(req)
		reply = &r
	}
	writeReply(w, hr, req, *reply)
}

func knownMethod(m string) bool {
	switch m {
	case MethodGenerateContent, MethodStreamGenerateContent, MethodBatchEmbedContents, MethodEmbedContent, MethodPredict:
		return true
	}
	return false
}

// splitPath extracts model and method from ".../models/{model}:{method}".
func splitPath(path string) (model, method string) {
	i := strings.LastIndex(path, "models/")
	if i < 0 {
		return "", ""
	}
	rest := path[i+len("models/"):]
	j := strings.LastIndex(rest, ":")
	if j <= 0 {
		return "", ""
	}
	return rest[:j], rest[j+1:]
}
