package standin

import (
	"fmt"
	"net/http"

	"github.com/secops-agent/investigator/gemini/geminitest"
	"github.com/secops-agent/investigator/internal/prompt"
)

// Handler returns the stand-in: a geminitest.Handler that answers every
// request of the investigation agent by its phase, deterministically.
func Handler() geminitest.Handler {
	return func(r *geminitest.Request) (reply geminitest.Reply) {
		defer func() {
			if v := recover(); v != nil { // a script defect must not kill the server
				reply = geminitest.Error(http.StatusBadRequest, fmt.Sprintf("the offline Gemini stand-in failed on this request: %v", v), "")
			}
		}()
		return respond(r)
	}
}

func respond(r *geminitest.Request) geminitest.Reply {
	if r.Phase() == geminitest.PhaseEmbed {
		vs := make([][]float32, len(r.EmbedTexts))
		for i, t := range r.EmbedTexts {
			vs[i] = Embedding(t)
		}
		return geminitest.Embeddings(vs...)
	}
	p := userPage(r)
	switch title := r.SchemaTitle(); {
	case title == prompt.PhasePlan:
		return geminitest.JSON(planReply(p))
	case title == prompt.PhaseReflect:
		return geminitest.JSON(reflectReply(p))
	case title == prompt.PhaseConclude:
		return geminitest.JSON(concludeReply(p))
	case title == prompt.PhaseMode:
		return geminitest.JSON(modeReply(p))
	case title == prompt.PhaseIntrospect:
		return geminitest.JSON(introspectReply(p))
	case title == prompt.PhaseVerdict:
		return geminitest.JSON(verdictReply(p))
	case r.ResponseSchema != nil:
		return geminitest.Error(http.StatusBadRequest, fmt.Sprintf("the offline Gemini stand-in has no script for a response schema titled %q", title), "")
	case declares(r, bqQuery):
		return subAgentReply(r, p)
	}
	if _, ok := p.step(); ok {
		return stepReply(r, p)
	}
	return answerReply(r, p)
}
