// Package modeltest holds in-memory stand-ins for the model and the
// transcript store, for the activities' unit tests (the e2e tests use a
// real Gemini-protocol server instead).
package modeltest

import (
	"context"
	"errors"
	"strings"
	"sync"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/transcript"
)

// LLM answers GenerateContent from a list of responses and records calls.
type LLM struct {
	mu      sync.Mutex
	Answers []*genai.GenerateContentResponse
	Calls   []Call
}

// Call is one recorded request.
type Call struct {
	Contents []*genai.Content
	Cfg      *genai.GenerateContentConfig
}

// New returns an LLM that gives these answers, in order.
func New(answers ...*genai.GenerateContentResponse) *LLM { return &LLM{Answers: answers} }

// GenerateContent records the request and returns the next answer.
func (f *LLM) GenerateContent(_ context.Context, _ string, contents []*genai.Content, cfg *genai.GenerateContentConfig) (*genai.GenerateContentResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, Call{contents, cfg})
	if len(f.Answers) == 0 {
		return nil, errors.New("modeltest: no answer left")
	}
	a := f.Answers[0]
	f.Answers = f.Answers[1:]
	return a, nil
}

// Text is a model answer holding one text part.
func Text(s string) *genai.GenerateContentResponse {
	return &genai.GenerateContentResponse{
		Candidates:    []*genai.Candidate{{Content: genai.NewContentFromText(s, genai.RoleModel), FinishReason: genai.FinishReasonStop}},
		UsageMetadata: &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 10, CandidatesTokenCount: 2},
	}
}

// UserText joins the text parts of a content.
func UserText(c *genai.Content) string {
	var b strings.Builder
	for _, p := range c.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// Transcript is an in-memory transcript store.
type Transcript struct{ M map[string]transcript.Entry }

// NewTranscript returns an empty store.
func NewTranscript() *Transcript { return &Transcript{M: map[string]transcript.Entry{}} }

// Put stores an entry under session/key unless one is there, and returns
// the stored one, as transcript.Store does.
func (s *Transcript) Put(_ context.Context, session, key string, e transcript.Entry) (transcript.Entry, error) {
	if err := transcript.CheckKey(key); err != nil {
		return transcript.Entry{}, err
	}
	if old, ok := s.M[session+"/"+key]; ok {
		return old, nil
	}
	s.M[session+"/"+key] = e
	return e, nil
}

// GetAll returns the entries of the keys, in order; it refuses a key
// Firestore refuses, as transcript.Store does, so a test cannot pass with
// a key only the fake takes.
func (s *Transcript) GetAll(_ context.Context, session string, keys []string) ([]transcript.Entry, error) {
	var out []transcript.Entry
	for _, k := range keys {
		if err := transcript.CheckKey(k); err != nil {
			return nil, err
		}
		e, ok := s.M[session+"/"+k]
		if !ok {
			return nil, &transcript.MissingError{Session: session, Key: k}
		}
		out = append(out, e)
	}
	return out, nil
}
