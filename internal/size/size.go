// Package size renders byte counts for people.
package size

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bytes renders n for people and keeps the exact count:
// "5.2 GiB (5583457484 bytes)"; below 1 KiB just "512 bytes".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; (m >= unit || m <= -unit) && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", float64(n)/float64(div), "KMGTPE"[exp], n)
}

// Parse reads a byte count written as a whole number with an optional
// binary unit: "1048576", "512MiB", "10 GiB", "1TiB" (KiB to PiB; "B" too).
func Parse(s string) (int64, error) {
	num := strings.TrimSpace(s)
	mult := int64(1)
	for i, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		if rest, ok := strings.CutSuffix(num, u); ok {
			num, mult = strings.TrimSpace(rest), int64(1)<<(10*(i+1))
			break
		}
	}
	if mult == 1 {
		num = strings.TrimSpace(strings.TrimSuffix(num, "B"))
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a byte count: write a whole number with an optional unit, like 10GiB or 500MiB", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is too large a byte count", s)
	}
	return n * mult, nil
}
