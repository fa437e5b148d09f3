package agentclient

import (
	"fmt"
	"strings"

	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/internal/size"
	"github.com/secops-agent/investigator/investigation"
)

// Cost is an estimate of what an investigation's model calls cost, from a
// price table (pricing.Table).
type Cost struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
	// Unpriced names the models the table has no price for; Amount leaves
	// their calls out.
	Unpriced []string `json:"unpriced,omitempty"`
}

func estimate(s investigation.Spend, prices pricing.Table) Cost {
	amount, unpriced := prices.Estimates(s.ByPhase.Phases())
	return Cost{Amount: amount, Currency: prices.Currency, Unpriced: unpriced}
}

// spendText renders what an investigation used, for the totals line:
// calls, tokens by phase, BigQuery bytes and the estimated cost.
func spendText(s investigation.Spend, prices pricing.Table) string {
	u := s.Usage
	var phases []string
	for _, ph := range s.ByPhase.Phases() {
		phases = append(phases, fmt.Sprintf("%s %d", ph.Name, ph.Usage.Tokens()))
	}
	text := fmt.Sprintf("%d tool calls, %d model calls (%d prompt + %d output tokens; by phase: %s)",
		s.ToolCalls, u.Calls, u.PromptTokens, u.OutputTokens+u.ThoughtTokens, strings.Join(phases, ", "))
	if s.ScannedBytes > 0 {
		text += ", BigQuery scanned " + size.Bytes(s.ScannedBytes)
	}
	c := estimate(s, prices)
	switch {
	case len(c.Unpriced) == 0:
		text += fmt.Sprintf("; estimated cost %.4f %s", c.Amount, c.Currency)
	case c.Amount > 0:
		text += fmt.Sprintf("; estimated cost over %.4f %s (no price for %s: starter --prices)", c.Amount, c.Currency, strings.Join(c.Unpriced, ", "))
	default:
		text += fmt.Sprintf("; no cost estimate (no price for %s: starter --prices)", strings.Join(c.Unpriced, ", "))
	}
	return text
}
