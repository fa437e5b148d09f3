package main

import (
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzValidators checks what the argument checks promise for any input:
// no panic, and whatever they accept fits on one line of a list file.
// go test ./cmd/response-server -run '^$' -fuzz FuzzValidators -fuzztime 30s
func FuzzValidators(f *testing.F) {
	for _, s := range []string{"198.51.100.23", "::ffff:10.0.0.1", "64:ff9b::7f00:1", "fe80::1%eth0", "alice", "root",
		"a\tb", "x\u202ey", "i-0abc1234def567890", "web-server-prod-01.", "", " ", strings.Repeat("9", 300)} {
		f.Add(s)
	}
	inv, err := loadInventory(shippedInventory)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if a, err := parseBlockIP(s, false, inv); err == nil {
			if !isPublic(a) || inv.owner(a) != "" || a.Zone() != "" || a.Is4In6() {
				t.Errorf("accepted %q as %v", s, a)
			}
			if b, err := netip.ParseAddr(a.String()); err != nil || b != a {
				t.Errorf("%v does not round-trip", a)
			}
		}
		if r, err := checkReason(s); err == nil {
			if r == "" || len(r) > maxReasonBytes || !utf8.ValidString(r) || strings.ContainsAny(r, "\t\r\n") {
				t.Errorf("accepted reason %q", r)
			}
			if es := parseEntries([]byte("x\tT\t" + r + "\n")); len(es) != 1 || es[0].Reason != r {
				t.Errorf("reason %q does not round-trip: %v", r, es)
			}
		}
		if u, err := checkUser(s); err == nil && (!userPattern.MatchString(u) || strings.ContainsAny(u, "\t\r\n/ ")) {
			t.Errorf("accepted user %q", u)
		}
		_, _ = inv.lookup(s)
	})
}
