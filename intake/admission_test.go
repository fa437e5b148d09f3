package intake

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
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
