package main

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	maxReasonBytes = 300
	maxIPInput     = 64 // longer than any IPv6 text form
)

// checkText refuses what would break the one-line-per-entry files or
// mislead whoever reads them: control characters (newlines, tabs, escape
// sequences), Unicode format characters (bidirectional overrides,
// zero-width joiners), line and paragraph separators, and invalid UTF-8. Its errors complete "reason ...".
func checkText(s string, limit int) error {
	if len(s) > limit {
		return fmt.Errorf("is longer than %d bytes", limit)
	}
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			return errors.New("contains a control or formatting character; it must be one line of plain text")
		}
	}
	return nil
}

func checkReason(reason string) (string, error) {
	r := strings.TrimSpace(reason)
	if r == "" {
		return "", errors.New("reason is required: say in one line why")
	}
	if err := checkText(r, maxReasonBytes); err != nil {
		return "", fmt.Errorf("reason %w", err)
	}
	return r, nil
}

// nonPublic lists ranges netip has no predicate for that are never a remote
// attacker's own address: "this network", shared address space
// (carrier-grade NAT), IETF protocol assignments, reserved/broadcast, and
// their IPv6 counterparts.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/96"),    // IPv4-compatible IPv6, deprecated
	netip.MustParsePrefix("100::/64"), // discard-only
}

// parseBlockIP accepts one IPv4 or IPv6 address (no prefix, no zone) and
// returns it in canonical form, IPv4-mapped IPv6 unmapped so that one
// address has one spelling in the block list.
func parseBlockIP(s string, allowPrivate bool, inv *inventory) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return netip.Addr{}, errors.New("ip is required")
	}
	if len(s) > maxIPInput {
		return netip.Addr{}, errors.New("ip is not an IP address")
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, errors.New("ip is not an IP address (one IPv4 or IPv6 address, no prefix length)")
	}
	if a.Zone() != "" {
		return netip.Addr{}, errors.New("ip must not carry an IPv6 zone")
	}
	a = a.Unmap()
	if !allowPrivate && !isPublic(a) {
		return netip.Addr{}, fmt.Errorf("%s is a loopback, private, link-local, multicast, reserved or unspecified address, which this server does not block unless started with --allow-private", a)
	}
	// A model that was talked into blocking our own servers would cause the
	// outage the attacker wanted; the inventory says which addresses are ours.
	if h := inv.owner(a); h != "" {
		return netip.Addr{}, fmt.Errorf("%s belongs to %s in the inventory, and this server does not block its own hosts", a, h)
	}
	return a, nil
}

// IPv6 ranges that carry an IPv4 address inside (NAT64, 6to4): the
// embedded address decides, so that 64:ff9b::a00:1 is not a way around the
// private-range rule.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

func isPublic(a netip.Addr) bool {
	if a.IsUnspecified() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() ||
		a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() || a.IsMulticast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return isPublic(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(a):
		return isPublic(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return true
}

// userPattern allows POSIX-style and directory user names and e-mail style
// principals, nothing that could be a path, a flag or a second line.
var userPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._@-]{0,127}$`)

// protectedUsers are accounts whose loss locks everyone out; a model must
// not be able to ask for them.
var protectedUsers = map[string]bool{"root": true, "administrator": true, "admin": true, "system": true}

func checkUser(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("user is required")
	}
	if !userPattern.MatchString(s) {
		return "", errors.New("user must be 1 to 128 letters, digits, '.', '_', '@' or '-', starting with a letter, digit or '_'")
	}
	if protectedUsers[strings.ToLower(s)] {
		return "", fmt.Errorf("%s is a built-in administrative account, which this server does not disable", s)
	}
	return s, nil
}
