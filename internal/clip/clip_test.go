package clip

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	if got := String("short", 10); got != "short" {
		t.Fatalf("fits: got %q", got)
	}
	long := strings.Repeat("a", 100)
	got := String(long, 40)
	if len(got) > 40 || !strings.HasSuffix(got, "]") || !Clipped(got) {
		t.Fatalf("clipped: got %q (%d bytes)", got, len(got))
	}
	kept := strings.Index(got, Marker)
	if want := " …[cut " + strconv.Itoa(100-kept) + " bytes]"; !strings.HasSuffix(got, want) {
		t.Fatalf("note: got %q, want suffix %q", got, want)
	}
	if Clipped(long) {
		t.Fatal("an unclipped string reads as clipped")
	}
}

func TestStringRuneBoundary(t *testing.T) {
	s := strings.Repeat("日本語", 30)
	for n := 0; n < len(s); n++ {
		got := String(s, n)
		if !utf8.ValidString(got) {
			t.Fatalf("n=%d: invalid UTF-8 %q", n, got)
		}
		if n >= 30 && len(got) > n {
			t.Fatalf("n=%d: %d bytes", n, len(got))
		}
	}
}

// TestStringAt: every cut falls where cuttable allows, inside the budget.
func TestStringAt(t *testing.T) {
	s := strings.Repeat("&amp;&lt;", 40)
	outside := func(s string, i int) bool {
		return !strings.Contains(s[max(0, i-4):i], "&") || strings.Contains(s[strings.LastIndex(s[:i], "&"):i], ";")
	}
	for n := 0; n < len(s)+2; n++ {
		got := StringAt(s, n, outside)
		kept, _, _ := strings.Cut(got, Marker)
		if n >= 30 && len(got) > n || strings.Count(kept, "&") != strings.Count(kept, ";") {
			t.Fatalf("n=%d: %q (%d bytes)", n, got, len(got))
		}
	}
}
