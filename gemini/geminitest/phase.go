package geminitest

import (
	"slices"
	"strings"

	"github.com/secops-agent/investigator/internal/prompt"
)

// Phases of the investigation agent, as recognised by (*Request).Phase. The
// structured ones are the titles the agent gives its response schemas.
const (
	PhaseEmbed      = "embed"                // an embedding request
	PhasePlan       = prompt.PhasePlan       // schema titled "plan" (or with property "steps")
	PhaseReflect    = prompt.PhaseReflect    // schema titled "reflect" (or with property "achieved")
	PhaseMode       = prompt.PhaseMode       // schema titled "mode" (or with property "mode")
	PhaseConclude   = prompt.PhaseConclude   // schema titled "conclude" (or with "report" and "verdict")
	PhaseIntrospect = prompt.PhaseIntrospect // schema titled "introspect"
	PhaseVerdict    = prompt.PhaseVerdict    // schema titled "verdict": the review after a direct answer
	PhaseStructured = "structured"           // any other response schema or JSON MIME type
	PhaseToolResult = "tool_result"          // the last content holds function responses
	PhaseToolCall   = "tool_call"            // functions declared, no function response yet
	PhaseText       = "text"                 // plain text generation
)

// Phase names the agent phase the request belongs to, judged from its
// response schema (its title first), declared functions and last content
// (see the Phase constants).
func (r *Request) Phase() string {
	switch r.Method {
	case MethodBatchEmbedContents, MethodEmbedContent, MethodPredict:
		return PhaseEmbed
	}
	switch t := r.SchemaTitle(); t {
	case PhasePlan, PhaseReflect, PhaseMode, PhaseConclude, PhaseIntrospect, PhaseVerdict:
		return t
	}
	// Schemas without a title (hand-written in tests) by their properties.
	props := r.SchemaProperties()
	switch {
	case slices.Contains(props, "steps"):
		return PhasePlan
	case slices.Contains(props, "achieved"):
		return PhaseReflect
	case slices.Contains(props, "mode"):
		return PhaseMode
	case slices.Contains(props, "report") && slices.Contains(props, "verdict"):
		return PhaseConclude
	case r.ResponseSchema != nil || strings.Contains(strings.ToLower(r.ResponseMIMEType), "json"):
		return PhaseStructured
	case len(r.FunctionResponses()) > 0:
		return PhaseToolResult
	case len(r.FunctionDeclarations()) > 0:
		return PhaseToolCall
	default:
		return PhaseText
	}
}
