package geminitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"google.golang.org/genai"
)

// Reply is the HTTP answer to one request. Status 0 means 200. Body is
// written as JSON, except a string or []byte, which is written as is. The
// bodies built by Text, JSON, Calls and Embeddings adapt to the request when
// written: generate replies get usageMetadata (estimated from the request
// and reply text) and the model version, and are sent as one SSE event to
// streamGenerateContent; embedding replies take the shape of the method.
type Reply struct {
	Status int
	Header http.Header
	Body   any
}

// generateBody is the wire form of a GenerateContentResponse.
type generateBody struct {
	Candidates    []candidate `json:"candidates"`
	UsageMetadata *usage      `json:"usageMetadata,omitempty"`
	ModelVersion  string      `json:"modelVersion,omitempty"`
}

type candidate struct {
	Content      *genai.Content `json:"content"`
	FinishReason string         `json:"finishReason"`
	Index        int            `json:"index"`
}

type usage struct {
	PromptTokenCount     int `json:"promptTokenCount"`
	CandidatesTokenCount int `json:"candidatesTokenCount"`
	TotalTokenCount      int `json:"totalTokenCount"`
}

// embeddingsBody is turned into the response shape of the request's method.
type embeddingsBody struct {
	vectors [][]float32
}

type values struct {
	Values []float32 `json:"values"`
}

func modelContent(parts ...*genai.Part) Reply {
	return Reply{Body: &generateBody{Candidates: []candidate{{
		Content:      &genai.Content{Role: genai.RoleModel, Parts: parts},
		FinishReason: string(genai.FinishReasonStop),
	}}}}
}

// Text is a model reply holding one text part.
func Text(s string) Reply {
	return modelContent(&genai.Part{Text: s})
}

// JSON is a model reply whose text part holds json.Marshal(v), as a model
// answers under a response schema. A value that cannot be marshalled gives a
// 500 reply saying so.
func JSON(v any) Reply {
	b, err := json.Marshal(v)
	if err != nil {
		return Error(http.StatusInternalServerError, "geminitest: JSON reply: cannot marshal value: "+err.Error(), "")
	}
	return Text(string(b))
}

// Conclusion is the reply of the conclusion phase: the Markdown report and
// a verdict with its confidence, resting on one evidence item that cites
// the alert itself (enough for true_positive or undetermined; benign and
// false_positive need ConclusionCiting).
func Conclusion(report, verdict, confidence string) Reply {
	return conclusion(report, verdict, confidence, map[string]any{"step_id": "alert", "tool": "", "fact": "The alert as shown (a scripted conclusion)."})
}

// ConclusionCiting is Conclusion resting on what tool showed in step: the
// evidence a benign or false_positive verdict needs (the alert's text alone
// does not settle those).
func ConclusionCiting(report, verdict, confidence, step, tool string) Reply {
	return conclusion(report, verdict, confidence, map[string]any{"step_id": step, "tool": tool, "fact": "What " + tool + " returned (a scripted conclusion)."})
}

func conclusion(report, verdict, confidence string, evidence map[string]any) Reply {
	return JSON(map[string]any{"report": report, "evidence": []any{evidence}, "reason": "A scripted conclusion.", "verdict": verdict, "confidence": confidence})
}

// Calls is a model reply with one function-call part per call, IDs kept as
// given (an empty ID is sent as no ID, as the Gemini API does).
func Calls(calls ...*genai.FunctionCall) Reply {
	parts := make([]*genai.Part, 0, len(calls))
	for _, c := range calls {
		if c != nil {
			parts = append(parts, &genai.Part{FunctionCall: c})
		}
	}
	return modelContent(parts...)
}

// Error is a Google API error reply:
// {"error":{"code":status,"message":message,"status":"UNAVAILABLE"|...}},
// with a Retry-After header when retryAfter is not empty.
func Error(status int, message string, retryAfter string) Reply {
	r := Reply{
		Status: status,
		Body: map[string]any{"error": map[string]any{
			"code":    status,
			"message": message,
			"status":  statusName(status),
		}},
	}
	if retryAfter != "" {
		r.Header = http.Header{"Retry-After": []string{retryAfter}}
	}
	return r
}

func statusName(code int) string {
	switch code {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 408, 504:
		return "DEADLINE_EXCEEDED"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 500:
		return "INTERNAL"
	case 405, 501:
		return "UNIMPLEMENTED"
	case 503:
		return "UNAVAILABLE"
	}
	if code >= 400 && code < 500 {
		return "FAILED_PRECONDITION"
	}
	return "UNKNOWN"
}

// Embeddings is an embedding reply, one vector per content:
// {"embeddings":[{"values":[...]}]} for batchEmbedContents,
// {"embedding":{"values":[...]}} (first vector) for embedContent and
// {"predictions":[{"embeddings":{"values":[...]}}]} for predict.
func Embeddings(vectors ...[]float32) Reply {
	return Reply{Body: &embeddingsBody{vectors: vectors}}
}

// Always answers every request with r.
func Always(r Reply) Handler {
	return func(*Request) Reply { return r }
}

// Script answers the n-th request with the n-th step, in arrival order. A
// request past the end gets a 500 whose message starts with
// "geminitest: script exhausted" (and is recorded by the Server like any
// other), so a test that makes one call too many fails with a clear error.
func Script(steps ...Handler) Handler {
	var mu sync.Mutex
	next := 0
	return func(r *Request) Reply {
		mu.Lock()
		i := next
		next++
		mu.Unlock()
		if i >= len(steps) {
			return Error(http.StatusInternalServerError, fmt.Sprintf(
				"geminitest: script exhausted: request %d (%s %s) but the script has %d step(s)",
				i+1, r.Method, r.Model, len(steps)), "")
		}
		if steps[i] == nil {
			return Error(http.StatusInternalServerError, fmt.Sprintf("geminitest: script step %d is nil", i+1), "")
		}
		return steps[i](r)
	}
}

// Replies is Script with one fixed reply per step.
func Replies(replies ...Reply) Handler {
	steps := make([]Handler, len(replies))
	for i, r := range replies {
		steps[i] = Always(r)
	}
	return Script(steps...)
}

// writeReply sends reply; req may be nil when the request could not be read.
func writeReply(w http.ResponseWriter, hr *http.Request, req *Request, reply Reply) {
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	body := reply.Body
	stream := req != nil && req.Method == MethodStreamGenerateContent && status == http.StatusOK
	switch b := body.(type) {
	case *generateBody:
		body = finishGenerate(b, req)
	case *embeddingsBody:
		body = embeddingsFor(b, req)
	}

	var out []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		out = b
	case string:
		out = []byte(b)
	default:
		var err error
		out, err = json.Marshal(b)
		if err != nil {
			status = http.StatusInternalServerError
			out, _ = json.Marshal(Error(status, "geminitest: cannot marshal reply body: "+err.Error(), "").Body)
		}
	}
	if stream {
		out = []byte("data: " + string(out) + "\n\n")
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "text/event-stream")
		}
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	}
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// finishGenerate returns a copy of b with usage metadata and model version
// filled in from the request when missing.
func finishGenerate(b *generateBody, req *Request) *generateBody {
	out := *b
	if out.ModelVersion == "" && req != nil {
		out.ModelVersion = req.Model
	}
	if out.UsageMetadata == nil {
		prompt := 0
		if req != nil {
			prompt = estimateTokens(len(req.Body))
		}
		reply := 0
		for _, c := range out.Candidates {
			if c.Content == nil {
				continue
			}
			for _, p := range c.Content.Parts {
				if p == nil {
					continue
				}
				reply += len(p.Text)
				if p.FunctionCall != nil {
					args, _ := json.Marshal(p.FunctionCall.Args)
					reply += len(p.FunctionCall.Name) + len(args)
				}
			}
		}
		u := usage{PromptTokenCount: prompt, CandidatesTokenCount: estimateTokens(reply)}
		u.TotalTokenCount = u.PromptTokenCount + u.CandidatesTokenCount
		out.UsageMetadata = &u
	}
	return &out
}

// estimateTokens is about four characters per token, at least one.
func estimateTokens(chars int) int {
	return max(1, (chars+3)/4)
}

func embeddingsFor(b *embeddingsBody, req *Request) any {
	method := MethodBatchEmbedContents
	if req != nil {
		method = req.Method
	}
	switch method {
	case MethodEmbedContent:
		var v []float32
		if len(b.vectors) > 0 {
			v = b.vectors[0]
		}
		return map[string]any{"embedding": values{Values: nonNil(v)}}
	case MethodPredict:
		preds := make([]map[string]any, len(b.vectors))
		for i, v := range b.vectors {
			preds[i] = map[string]any{"embeddings": values{Values: nonNil(v)}}
		}
		return map[string]any{"predictions": preds}
	default:
		embs := make([]values, len(b.vectors))
		for i, v := range b.vectors {
			embs[i] = values{Values: nonNil(v)}
		}
		return map[string]any{"embeddings": embs}
	}
}

func nonNil(v []float32) []float32 {
	if v == nil {
		return []float32{}
	}
	return v
}
