package standin

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func cosine(a, b []float32) float64 {
	var dot float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
	}
	return dot
}

// A later request about a login's session recalls the claim an earlier
// session learned about the login table (the worker's default similarity
// floor is 0.8); requests about processes or DNS do not.
func TestEmbeddingRecallsByTopic(t *testing.T) {
	claim := Embedding("In security_logs.auth_events, logins from a source_ip have event_type 'ssh_failed' (success false) or 'ssh_accepted' (success true).")
	session := Embedding("What did the session of user deploy, who logged in to web-server-prod-01 from 198.51.100.23 at 2026-11-20 08:14:52 UTC, do in the hour after that login? List its events in order.")
	logins := Embedding("Did 198.51.100.23 log in to web-server-prod-01 (i-0abc1234def567890) on 2026-11-20 after its failed attempts, and as which user?")
	processes := Embedding("Find process launches on web-server-prod-01 between 2026-11-20 08:40 and 09:30 UTC.")
	dns := Embedding("Which hosts looked up cdn-sync.example.net on 2026-11-20, and how often?")
	assert.GreaterOrEqual(t, cosine(claim, session), 0.8)
	assert.GreaterOrEqual(t, cosine(claim, logins), 0.8)
	assert.Less(t, cosine(claim, processes), 0.8)
	assert.Less(t, cosine(claim, dns), 0.8)
}

func TestEmbeddingIsADeterministicUnitVector(t *testing.T) {
	for _, text := range []string{"", "!!!", "ssh login", "an unrelated sentence"} {
		v := Embedding(text)
		assert.Len(t, v, Dims)
		assert.InDelta(t, 1, math.Sqrt(cosine(v, v)), 1e-6)
		assert.Equal(t, v, Embedding(text))
	}
	assert.NotEqual(t, Embedding("ssh login from a"), Embedding("ssh login from b"))
}
