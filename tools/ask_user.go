package tools

import (
	"context"
	"errors"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/toolcall"
)

// NewAskUser returns the declaration of ask_user. The workflow answers it
// (it waits for the analyst), never Call.
func NewAskUser() Tool { return askUser{} }

type askUser struct{}

func (askUser) Purpose() string {
	return "Ask the analyst one precise question about a fact only they know (ownership, authorisation); the step waits for the answer."
}

// RunsAs says that the analyst answers ask_user: the workflow waits for it.
func (askUser) RunsAs() toolcall.Tool { return toolcall.Tool{Kind: toolcall.Analyst} }

func (askUser) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name: toolcall.AskUser,
		Description: "Ask the analyst running this investigation one precise question, for a fact only they have " +
			"(who owns a host, whether a change or login was authorised, business context). Returns {answer}, " +
			"or {answer: null, note} when no answer came in time. Example question: \"Is user deploy expected to log in from outside the VPN?\"",
		Parameters: &genai.Schema{
			Type:       genai.TypeObject,
			Properties: map[string]*genai.Schema{"question": {Type: genai.TypeString, Description: "One question, answerable in a sentence."}},
			Required:   []string{"question"},
		},
	}
}

func (askUser) Call(context.Context, map[string]any) (any, error) {
	return nil, errors.New("ask_user is answered by the workflow, not by an activity")
}
