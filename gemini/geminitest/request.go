package geminitest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"google.golang.org/genai"
)

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
	return ContentText(r.SystemInstruction)
}

// Text returns the system text and the text of all contents, joined by
// newlines: handy for "does the prompt contain X" assertions.
func (r *Request) Text() string {
	var parts []string
	if s := r.SystemText(); s != "" {
		parts = append(parts, s)
	}
	for _, c := range r.Contents {
		if s := ContentText(c); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n")
}

// FunctionNames returns the names of all declared functions, in order.
func (r *Request) FunctionNames() []string {
	var names []string
	for _, fd := range r.FunctionDeclarations() {
		names = append(names, fd.Name)
	}
	return names
}

// FunctionDeclarations returns every declared function, in order.
func (r *Request) FunctionDeclarations() []*genai.FunctionDeclaration {
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

// ContentText returns the text parts of c joined by newlines ("" for nil).
func ContentText(c *genai.Content) string {
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
