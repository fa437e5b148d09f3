package size

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0:             "0 bytes",
		1:             "1 bytes",
		1023:          "1023 bytes",
		2430:          "2.4 KiB (2430 bytes)",
		1 << 30:       "1.0 GiB (1073741824 bytes)",
		5583457484:    "5.2 GiB (5583457484 bytes)",
		-2048:         "-2.0 KiB (-2048 bytes)",
		math.MaxInt64: "8.0 EiB (9223372036854775807 bytes)",
	} {
		assert.Equal(t, want, Bytes(n), "Bytes(%d)", n)
	}
}

func TestParse(t *testing.T) {
	for s, want := range map[string]int64{
		"0":       0,
		"1048576": 1 << 20,
		"512B":    512,
		"512MiB":  512 << 20,
		"10 GiB":  10 << 30,
		" 1TiB ":  1 << 40,
		"8191PiB": 8191 << 50,
	} {
		got, err := Parse(s)
		if assert.NoError(t, err, s) {
			assert.Equal(t, want, got, s)
		}
	}
	for _, s := range []string{"", "-1", "1.5GiB", "10GB", "GiB", "8192PiB", "99999999999999999999"} {
		_, err := Parse(s)
		assert.Error(t, err, "%q", s)
	}
}
