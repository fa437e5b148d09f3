package intake

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/internal/pricing"
)

// TestSettingsCheckRefusesNonFiniteBudgets: NaN passed every comparison
// and NaN or Inf then failed the encoding of every admit request, so no
// alert was ever admitted.
func TestSettingsCheckRefusesNonFiniteBudgets(t *testing.T) {
	ok := Settings{}.WithDefaults()
	require.NoError(t, ok.Check())
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		s := ok
		s.DailyBudgetUSD = v
		require.ErrorContains(t, s.Check(), "--daily-budget-usd must be a number of dollars", v)
	}
	s := ok
	s.DailyBudgetUSD = 12.5
	require.NoError(t, s.Check())
}

// TestSettingsCheckBoundsWhatTheRoomKeeps: the admission workflow keeps
// the latest settings whole in its state, carried across continue-as-new;
// a price table of 1 MiB (pricing.Load's bound), or names JSON writes in 6
// bytes a character, would push it past Temporal's 2 MB payload limit.
func TestSettingsCheckBoundsWhatTheRoomKeeps(t *testing.T) {
	ok := Settings{}.WithDefaults()
	many := ok
	many.Prices.Models = map[string]pricing.Price{}
	for i := range MaxPriceModels + 1 {
		many.Prices.Models[fmt.Sprintf("model-%d", i)] = pricing.Price{Input: 1, Output: 2}
	}
	long, escaped, source, currency, topic, nan := ok, ok, ok, ok, ok, ok
	long.Prices.Models = map[string]pricing.Price{strings.Repeat("m", maxPriceName+1): {}}
	escaped.Prices.Models = map[string]pricing.Price{strings.Repeat("<", 10): {}}
	source.Prices.Source = strings.Repeat("&", 10)
	currency.Prices.Currency = strings.Repeat("U", maxCurrencyBytes+1)
	topic.Delivery.ResultsTopic = "projects/p/topics/" + strings.Repeat("t", maxTopicBytes)
	nan.Prices.Models = map[string]pricing.Price{"m": {Input: math.NaN()}}
	// Tokens times this overflow to +Inf, which no JSON encodes.
	huge := ok
	huge.Prices.Models = map[string]pricing.Price{"m": {Output: math.MaxFloat64}}
	for name, s := range map[string]Settings{"many": many, "long": long, "escaped": escaped, "source": source, "currency": currency, "topic": topic, "nan": nan, "huge": huge} {
		require.Error(t, s.Check(), name)
	}
	require.NoError(t, ok.Check())
}
