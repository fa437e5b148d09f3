package yamltext

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

type file struct {
	Limit int64              `yaml:"limit"`
	Price float64            `yaml:"price"`
	Items map[string]float64 `yaml:"items"`
}

func decode(t *testing.T, raw string) string {
	t.Helper()
	var f file
	dec := yaml.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.KnownFields(true)
	err := dec.Decode(&f)
	require.Error(t, err)
	return Error(err)
}

// TestErrorQuotesNoValue: a value that may be the start of a pasted secret
// is never quoted; every error is one line; an empty file is said so.
func TestErrorQuotesNoValue(t *testing.T) {
	const secret = "sk-live-0123456789"
	for raw, want := range map[string]string{
		"limit: " + secret + "\nprice: 1\n":          "line 1: a !!str value where int64 belongs",
		"price: " + secret + "\nbogus: 1\n":          `line 1: a !!str value where float64 belongs; line 2: unknown field "bogus"`,
		"items:\n  a: \"sk-`live`\\n-0123456789\"\n": "line 2: a !!str value where float64 belongs",
		"limit: !!int " + secret + "\n":              "cannot decode !!str (a value) as a !!int",
		"\"a\\nb\": 1\n":                             `line 1: unknown field "a\nb"`,
		"items: [1]\n":                               "line 1: a !!seq value where map[string]float64 belongs",
		"":                                           Empty,
		"# only a comment\n":                         Empty,
		"limit: 1\n  price: [\n":                     "line 2: mapping values are not allowed in this context",
	} {
		got := decode(t, raw)
		require.Equal(t, want, got, raw)
		require.NotContains(t, got, "sk-", raw)
		require.NotContains(t, got, "\n", raw)
	}
}
