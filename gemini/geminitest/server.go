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
// of handlers in order, Always repeats one reply and Auto is a deterministic
// responder for offline demos.
package geminitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"

	"google.golang.org/genai"
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

// Request is one parsed request.
type Request struct {
	// Model is the model name from the path, without "models/".
	Model string
	// Method is "generateContent", "streamGenerateContent",
	// "batchEmbedContents", "embedContent" or "predict".
	Method string
	// APIKey is the x-goog-api-key header (or the key query parameter).
	APIKey string
	// Path is the URL path; Header the request headers.
	Path   string
	Header http.Header
	// Body is the raw request body.
	Body []byte

	// Generate requests.
	Contents          []*genai.Content
	SystemInstruction *genai.Content
	Tools             []*genai.Tool
	ToolConfig        *genai.ToolConfig
	// GenerationConfig is the raw "generationConfig" object.
	GenerationConfig json.RawMessage
	// ResponseMIMEType is generationConfig.responseMimeType.
	ResponseMIMEType string
	// ResponseSchema is generationConfig.responseSchema (set from a
	// *genai.Schema) or, when that is absent, responseJsonSchema (set from
	// GenerateContentConfig.ResponseJsonSchema); SchemaField says which.
	ResponseSchema map[string]any
	SchemaField    string

	// EmbedTexts holds, for embedding requests, the text of each content to
	// embed, in order.
	EmbedTexts []string
}

// SystemText returns all text of the system instruction, parts joined by
// newlines.
func (r *Request) SystemText() string {
	return contentText(r.SystemInstruction)
}

// Text returns the system text and the text of all contents, joined by
// newlines: handy for "does the prompt contain X" assertions.
func (r *Request) Text() string {
	var parts []string
	if s := r.SystemText(); s != "" {
		parts = append(parts, s)
	}
	for _, c := range r.Contents {
		if s := contentText(c); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n")
}

// FunctionNames returns the names of all declared functions, in order.
func (r *Request) FunctionNames() []string {
	var names []string
	for _, fd := range r.functionDeclarations() {
		names = append(names, fd.Name)
	}
	return names
}

func (r *Request) functionDeclarations() []*genai.FunctionDeclaration {
	var out []*genai.FunctionDeclaration
	for _, t := range r.Tools {
		if t == nil {
			continue
		}
		for _, fd := range t.FunctionDeclarations {
			if fd != nil {
				out = append(out, fd)
			}
		}
	}
	return out
}

// FunctionResponses returns the function responses in the last content.
func (r *Request) FunctionResponses() []*genai.FunctionResponse {
	if len(r.Contents) == 0 {
		return nil
	}
	last := r.Contents[len(r.Contents)-1]
	if last == nil {
		return nil
	}
	var out []*genai.FunctionResponse
	for _, p := range last.Parts {
		if p != nil && p.FunctionResponse != nil {
			out = append(out, p.FunctionResponse)
		}
	}
	return out
}

// SchemaProperties returns the sorted top-level property names of the
// response schema, or nil when the request has none.
func (r *Request) SchemaProperties() []string {
	props, _ := r.ResponseSchema["properties"].(map[string]any)
	if len(props) == 0 {
		return nil
	}
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// SchemaTitle returns the response schema's title, or "". The agent titles
// each structured phase's schema with the phase's name.
func (r *Request) SchemaTitle() string {
	t, _ := r.ResponseSchema["title"].(string)
	return t
}

func contentText(c *genai.Content) string {
	if c == nil {
		return ""
	}
	var texts []string
	for _, p := range c.Parts {
		if p != nil && p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

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

func (r *Request) parseBody() error {
	if len(bytes.TrimSpace(r.Body)) == 0 {
		return fmt.Errorf("empty body")
	}
	switch r.Method {
	case MethodGenerateContent, MethodStreamGenerateContent:
		return r.parseGenerate()
	default:
		return r.parseEmbed()
	}
}

func (r *Request) parseGenerate() error {
	var raw struct {
		Contents          json.RawMessage `json:"contents"`
		SystemInstruction json.RawMessage `json:"systemInstruction"`
		Tools             json.RawMessage `json:"tools"`
		ToolConfig        json.RawMessage `json:"toolConfig"`
		GenerationConfig  json.RawMessage `json:"generationConfig"`
	}
	if err := json.Unmarshal(r.Body, &raw); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	fields := []struct {
		name string
		raw  json.RawMessage
		dst  any
	}{
		{"contents", raw.Contents, &r.Contents},
		{"systemInstruction", raw.SystemInstruction, &r.SystemInstruction},
		{"tools", raw.Tools, &r.Tools},
		{"toolConfig", raw.ToolConfig, &r.ToolConfig},
	}
	for _, f := range fields {
		if len(f.raw) == 0 {
			continue
		}
		if err := json.Unmarshal(f.raw, f.dst); err != nil {
			return fmt.Errorf("field %s: %w", f.name, err)
		}
	}
	if len(r.Contents) == 0 {
		return fmt.Errorf("contents is required")
	}
	if len(raw.GenerationConfig) > 0 {
		r.GenerationConfig = raw.GenerationConfig
		var gc struct {
			ResponseMIMEType   string         `json:"responseMimeType"`
			ResponseSchema     map[string]any `json:"responseSchema"`
			ResponseJSONSchema map[string]any `json:"responseJsonSchema"`
		}
		if err := json.Unmarshal(raw.GenerationConfig, &gc); err != nil {
			return fmt.Errorf("field generationConfig: %w", err)
		}
		r.ResponseMIMEType = gc.ResponseMIMEType
		switch {
		case gc.ResponseSchema != nil:
			r.ResponseSchema, r.SchemaField = gc.ResponseSchema, "responseSchema"
		case gc.ResponseJSONSchema != nil:
			r.ResponseSchema, r.SchemaField = gc.ResponseJSONSchema, "responseJsonSchema"
		}
	}
	return nil
}

func (r *Request) parseEmbed() error {
	var raw struct {
		Requests []struct {
			Content *genai.Content `json:"content"`
		} `json:"requests"`
		Content   *genai.Content `json:"content"`
		Instances []struct {
			Content json.RawMessage `json:"content"`
		} `json:"instances"`
	}
	if err := json.Unmarshal(r.Body, &raw); err != nil {
		return fmt.Errorf("not an embedding request: %w", err)
	}
	switch r.Method {
	case MethodBatchEmbedContents:
		for _, q := range raw.Requests {
			r.EmbedTexts = append(r.EmbedTexts, contentText(q.Content))
		}
	case MethodEmbedContent:
		if raw.Content == nil {
			return fmt.Errorf("content is required")
		}
		r.EmbedTexts = append(r.EmbedTexts, contentText(raw.Content))
	case MethodPredict:
		for _, in := range raw.Instances {
			var s string
			if json.Unmarshal(in.Content, &s) == nil {
				r.EmbedTexts = append(r.EmbedTexts, s)
				continue
			}
			var c genai.Content
			if err := json.Unmarshal(in.Content, &c); err != nil {
				return fmt.Errorf("instances[].content: %w", err)
			}
			r.EmbedTexts = append(r.EmbedTexts, contentText(&c))
		}
	}
	if len(r.EmbedTexts) == 0 {
		return fmt.Errorf("nothing to embed")
	}
	return nil
}
