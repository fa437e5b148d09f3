package geminitest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"
)

const (
	testKey   = "test-key"
	testModel = "gemini-2.5-flash"
)

// newClient is a real genai client pointed at srv, SDK retries off.
func newClient(t *testing.T, srv *Server) *genai.Client {
	t.Helper()
	t.Setenv("GOOGLE_GENAI_USE_VERTEXAI", "false")
	attempts := int32(1)
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:  testKey,
		Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{
			BaseURL:      srv.URL,
			RetryOptions: &genai.HTTPRetryOptions{Attempts: &attempts},
		},
	})
	require.NoError(t, err)
	return c
}

func generateText(t *testing.T, c *genai.Client, prompt string) (string, error) {
	t.Helper()
	resp, err := c.Models.GenerateContent(context.Background(), testModel, genai.Text(prompt), nil)
	if err != nil {
		return "", err
	}
	return resp.Text(), nil
}

func TestScriptRepliesInOrderThenExhausts(t *testing.T) {
	srv := NewServer(Script(
		Always(Text("one")),
		func(r *Request) Reply { return Text("two: " + r.Text()) },
	))
	defer srv.Close()
	c := newClient(t, srv)

	got, err := generateText(t, c, "first")
	require.NoError(t, err)
	assert.Equal(t, "one", got)
	got, err = generateText(t, c, "second")
	require.NoError(t, err)
	assert.Equal(t, "two: second", got)

	_, err = generateText(t, c, "third")
	require.Error(t, err)
	var apiErr genai.APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusInternalServerError, apiErr.Code)
	assert.Contains(t, apiErr.Message, "script exhausted")
	assert.Contains(t, apiErr.Message, "request 3")

	reqs := srv.Requests()
	require.Len(t, reqs, 3, "requests past the script are recorded too")
	for i, want := range []string{"first", "second", "third"} {
		assert.Equal(t, want, reqs[i].Text())
		assert.Equal(t, testModel, reqs[i].Model)
		assert.Equal(t, MethodGenerateContent, reqs[i].Method)
		assert.Equal(t, testKey, reqs[i].APIKey)
	}
}

func TestServerConcurrentRequests(t *testing.T) {
	srv := NewServer(Always(Text("ok")))
	defer srv.Close()
	c := newClient(t, srv)

	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := generateText(t, c, fmt.Sprintf("prompt %d", i))
			if err == nil && got != "ok" {
				err = fmt.Errorf("got %q", got)
			}
			errs <- err
			_ = srv.Requests() // reading while writing is safe
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	reqs := srv.Requests()
	require.Len(t, reqs, n)
	seen := map[string]bool{}
	for _, r := range reqs {
		seen[r.Text()] = true
	}
	assert.Len(t, seen, n)
}

func TestRequestParsingResponseSchemaAndTools(t *testing.T) {
	srv := NewServer(Always(JSON(map[string]any{"steps": []any{}})))
	defer srv.Close()
	c := newClient(t, srv)

	schema := &genai.Schema{
		Type: genai.TypeObject,
		Properties: map[string]*genai.Schema{
			"objective": {Type: genai.TypeString},
			"steps":     {Type: genai.TypeArray, Items: &genai.Schema{Type: genai.TypeObject}},
		},
		Required: []string{"objective", "steps"},
	}
	_, err := c.Models.GenerateContent(context.Background(), testModel, genai.Text("plan please"), &genai.GenerateContentConfig{
		SystemInstruction: genai.NewContentFromText("system line one", genai.RoleUser),
		ResponseMIMEType:  "application/json",
		ResponseSchema:    schema,
	})
	require.NoError(t, err)

	_, err = c.Models.GenerateContent(context.Background(), testModel, genai.Text("reflect please"), &genai.GenerateContentConfig{
		ResponseMIMEType: "application/json",
		ResponseJsonSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"achieved": map[string]any{"type": "boolean"}, "insights": map[string]any{"type": "array"}},
		},
		Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "a"}, {Name: "b"}}}},
		ToolConfig: &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{
			Mode: genai.FunctionCallingConfigModeAny, AllowedFunctionNames: []string{"a"},
		}},
	})
	require.NoError(t, err)

	reqs := srv.Requests()
	require.Len(t, reqs, 2)

	r := reqs[0]
	assert.Equal(t, "responseSchema", r.SchemaField)
	assert.Equal(t, []string{"objective", "steps"}, r.SchemaProperties())
	assert.Equal(t, "OBJECT", r.ResponseSchema["type"])
	assert.Equal(t, "application/json", r.ResponseMIMEType)
	assert.Equal(t, "system line one", r.SystemText())
	assert.Equal(t, "system line one\nplan please", r.Text())
	assert.Nil(t, r.FunctionNames())
	var body map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &body))
	assert.Contains(t, body, "systemInstruction")
	assert.Contains(t, body, "generationConfig")
	assert.Contains(t, string(r.GenerationConfig), `"responseSchema"`)
	assert.Equal(t, PhasePlan, r.Phase())

	r = reqs[1]
	assert.Equal(t, "responseJsonSchema", r.SchemaField)
	assert.Equal(t, []string{"achieved", "insights"}, r.SchemaProperties())
	assert.Equal(t, []string{"a", "b"}, r.FunctionNames())
	require.NotNil(t, r.ToolConfig)
	require.NotNil(t, r.ToolConfig.FunctionCallingConfig)
	assert.Equal(t, genai.FunctionCallingConfigModeAny, r.ToolConfig.FunctionCallingConfig.Mode)
	assert.Equal(t, []string{"a"}, r.ToolConfig.FunctionCallingConfig.AllowedFunctionNames)
	assert.Equal(t, PhaseReflect, r.Phase())
	body = nil
	require.NoError(t, json.Unmarshal(r.Body, &body))
	assert.Contains(t, body, "tools")
	assert.Contains(t, body, "toolConfig")
	assert.NotContains(t, body, "systemInstruction")
}

func TestEmbeddingsRoundTrip(t *testing.T) {
	srv := NewServer(Always(Embeddings([]float32{1, 0}, []float32{0, 1})))
	defer srv.Close()
	c := newClient(t, srv)

	resp, err := c.Models.EmbedContent(context.Background(), "gemini-embedding-001",
		[]*genai.Content{genai.NewContentFromText("alpha", genai.RoleUser), genai.NewContentFromText("beta", genai.RoleUser)},
		&genai.EmbedContentConfig{OutputDimensionality: genai.Ptr[int32](2)})
	require.NoError(t, err)
	require.Len(t, resp.Embeddings, 2)
	assert.Equal(t, []float32{1, 0}, resp.Embeddings[0].Values)
	assert.Equal(t, []float32{0, 1}, resp.Embeddings[1].Values)

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, MethodBatchEmbedContents, reqs[0].Method)
	assert.Equal(t, "gemini-embedding-001", reqs[0].Model)
	assert.Equal(t, []string{"alpha", "beta"}, reqs[0].EmbedTexts)
	assert.Equal(t, PhaseEmbed, reqs[0].Phase())
}

func TestEmbedContentMethodShape(t *testing.T) {
	srv := NewServer(Always(Embeddings([]float32{0.5, 0.5})))
	defer srv.Close()

	res, err := http.Post(srv.URL+"/v1beta/models/text-embedding-004:embedContent", "application/json",
		strings.NewReader(`{"content":{"parts":[{"text":"hello world"}]}}`))
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	var out struct {
		Embedding struct {
			Values []float32 `json:"values"`
		} `json:"embedding"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
	assert.Equal(t, []float32{0.5, 0.5}, out.Embedding.Values)
	require.Len(t, srv.Requests(), 1)
	assert.Equal(t, []string{"hello world"}, srv.Requests()[0].EmbedTexts)
}

func TestStreamGenerateContent(t *testing.T) {
	srv := NewServer(Always(Text("streamed")))
	defer srv.Close()
	c := newClient(t, srv)

	var texts []string
	for resp, err := range c.Models.GenerateContentStream(context.Background(), testModel, genai.Text("hi"), nil) {
		require.NoError(t, err)
		texts = append(texts, resp.Text())
		require.NotNil(t, resp.UsageMetadata)
	}
	assert.Equal(t, []string{"streamed"}, texts)
	assert.Equal(t, MethodStreamGenerateContent, srv.Requests()[0].Method)
}

func TestBadRequestsGetGoogleErrors(t *testing.T) {
	srv := NewServer(Always(Text("never")))
	defer srv.Close()

	cases := []struct {
		method, path, body string
		status             int
	}{
		{http.MethodGet, "/v1beta/models/" + testModel, "", http.StatusMethodNotAllowed},
		{http.MethodPost, "/v1beta/files", "{}", http.StatusNotFound},
		{http.MethodPost, "/v1beta/models/" + testModel + ":countTokens", "{}", http.StatusNotFound},
		{http.MethodPost, "/v1beta/models/" + testModel + ":generateContent", "{not json", http.StatusBadRequest},
		{http.MethodPost, "/v1beta/models/" + testModel + ":generateContent", `{"contents":[]}`, http.StatusBadRequest},
		{http.MethodPost, "/v1beta/models/" + testModel + ":generateContent", `{"contents":[{"parts":"x"}]}`, http.StatusBadRequest},
	}
	for _, tc := range cases {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		require.NoError(t, err)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		assert.Equal(t, tc.status, res.StatusCode, "%s %s %s", tc.method, tc.path, tc.body)
		var e struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(b, &e), string(b))
		assert.Equal(t, tc.status, e.Error.Code)
		assert.Contains(t, e.Error.Message, "geminitest")
		assert.NotEmpty(t, e.Error.Status)
	}
	assert.Len(t, srv.Requests(), len(cases))
}

func TestErrorReply(t *testing.T) {
	srv := NewServer(Always(Error(http.StatusServiceUnavailable, "overloaded", "7")))
	defer srv.Close()
	res, err := http.Post(srv.URL+"/v1beta/models/m:generateContent", "application/json", strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"x"}]}]}`))
	require.NoError(t, err)
	defer res.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.Equal(t, "7", res.Header.Get("Retry-After"))
	b, _ := io.ReadAll(res.Body)
	assert.JSONEq(t, `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`, string(b))

	assert.Nil(t, Error(429, "x", "").Header, "no Retry-After header when empty")
}

func TestJSONReplyOfUnmarshallableValueIsAnError(t *testing.T) {
	r := JSON(map[string]any{"f": func() {}})
	assert.Equal(t, http.StatusInternalServerError, r.Status)
}

func TestNewHTTPHandlerServesOnOwnListener(t *testing.T) {
	hs := httptest.NewServer(NewHTTPHandler(Always(Text("## Summary\nserved"))))
	defer hs.Close()
	c := newClient(t, &Server{URL: hs.URL})

	got, err := generateText(t, c, "Summarise the investigation.")
	require.NoError(t, err)
	assert.Equal(t, "## Summary\nserved", got)
}
