package standin

import (
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// Dims is the size of the vectors the stand-in returns (memory.Dimensions).
const Dims = 768

// topics are the few subjects the embedding knows, each a word list. A
// text's vector is mostly its count of words of each topic, one dimension
// per topic, so that a request about logins lands near a claim about the
// table of logins although they share few words, as a real embedding would
// place them; every other word adds a small hashed component, so texts
// differ and identical texts are identical.
var topics = [][]string{
	{"login", "logins", "logged", "logon", "ssh", "sshd", "auth", "authentication", "password", "accepted", "failed",
		"failure", "failures", "brute", "session", "sessions", "sudo", "user", "users", "account", "credentials", "success"},
	{"process", "processes", "command", "commands", "executed", "binary", "pid", "ppid", "parent", "cpu", "miner", "launches"},
	{"network", "connection", "connections", "dns", "flow", "flows", "traffic", "outbound", "inbound", "port", "bytes", "domain"},
	{"cloud", "audit", "api", "iam", "principal", "role", "service", "project", "bucket", "cloudtrail"},
}

// otherWeight is what a word outside the topics adds.
const otherWeight = 0.25

// Embedding is the deterministic unit vector the stand-in returns for text.
func Embedding(text string) []float32 {
	acc := make([]float64, Dims)
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for _, w := range words {
		if k := topicOf(w); k >= 0 {
			acc[k]++
			continue
		}
		h := fnv.New64a()
		_, _ = h.Write([]byte(w))
		x := h.Sum64()
		sign := 1.0
		if x>>63 == 1 {
			sign = -1
		}
		acc[len(topics)+int(x%uint64(Dims-len(topics)))] += sign * otherWeight
	}
	var norm float64
	for _, v := range acc {
		norm += v * v
	}
	out := make([]float32, Dims)
	if norm == 0 {
		out[Dims-1] = 1
		return out
	}
	norm = math.Sqrt(norm)
	for i, v := range acc {
		out[i] = float32(v / norm)
	}
	return out
}

func topicOf(w string) int {
	for k, list := range topics {
		for _, t := range list {
			if t == w {
				return k
			}
		}
	}
	return -1
}
