package memory

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// MaxClaimBytes bounds one memory's claim: a memory is one reusable fact
// about the data, not a transcript.
const MaxClaimBytes = 300

// What a claim must not hold. A claim is schema knowledge (tables, columns,
// value formats, SQL patterns, query pitfalls); indicators, timestamps and
// instructions are this session's results or an attacker's words, and a
// memory carrying them would reach every later session's prompt.
var (
	emailRE    = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`)
	urlRE      = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://`)
	hashRE     = regexp.MustCompile(`\b[0-9A-Fa-f]{32,}\b`)
	dateTimeRE = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}`)
	arnRE      = regexp.MustCompile(`\barn:aws[a-z-]*:`)
	instanceRE = regexp.MustCompile(`\b(?:i|sg|vol|eni|ami|subnet|vpc)-[0-9a-f]{8,17}\b`)
	domainRE   = regexp.MustCompile(`(?i)\b(?:[a-z0-9-]+\.)+(?:com|net|org|io|info|biz|ru|cn|xyz|top|co|uk|de|jp|onion|site|online|club|example|test|local|internal)\b`)
	// instruction words: a claim that orders the agent or judges the
	// incident is not knowledge about the data.
	instructionRE = regexp.MustCompile(`(?i)\b(?:ignore|disregard|forget|override|obey|pretend|you (?:must|should|need)|do not|don't|instructions?|the analyst|the agent|the investigation|verdict|benign|malicious|false positive|true positive|compromised?|conclude)\b`)
)

// CheckClaim says why a claim may not be kept as a memory, or nil. A claim
// must be one line of at most MaxClaimBytes, name one of the tables the
// sub-agent may query ("dataset.table" or the bare table name), and hold no
// indicator value (IP address, e-mail, URL, hash, domain, ARN, instance ID),
// no timestamp from a log row, and no instruction.
func CheckClaim(claim string, tables []string) error {
	switch {
	case strings.TrimSpace(claim) == "":
		return errors.New("the claim is empty")
	case len(claim) > MaxClaimBytes:
		return fmt.Errorf("the claim is %d bytes, more than %d", len(claim), MaxClaimBytes)
	case strings.ContainsFunc(claim, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }):
		return errors.New("the claim is not a single line of text")
	}
	if ip := findIP(claim); ip != "" {
		return fmt.Errorf("the claim holds the IP address %s", ip)
	}
	for _, c := range []struct {
		re   *regexp.Regexp
		what string
	}{
		{emailRE, "an e-mail address"}, {urlRE, "a URL"}, {hashRE, "a hash"}, {arnRE, "an ARN"},
		{instanceRE, "a cloud resource ID"}, {dateTimeRE, "a timestamp from the data"}, {instructionRE, "an instruction or a judgement"},
	} {
		if m := c.re.FindString(claim); m != "" {
			return fmt.Errorf("the claim holds %s (%q)", c.what, m)
		}
	}
	if m := domainRE.FindString(claim); m != "" && !namesTable(m, tables) {
		return fmt.Errorf("the claim holds the domain %q", m)
	}
	if !slices.ContainsFunc(tables, func(t string) bool { return namesTable(claim, []string{t}) }) {
		return errors.New("the claim names none of the tables the sub-agent may query")
	}
	return nil
}

// namesTable says whether text mentions one of the tables, by its
// "dataset.table" ID or its bare table name, as a whole word.
func namesTable(text string, tables []string) bool {
	lower := strings.ToLower(text)
	for _, t := range tables {
		t = strings.ToLower(t)
		names := []string{t}
		if _, bare, ok := strings.Cut(t, "."); ok {
			names = append(names, bare)
		}
		for _, n := range names {
			for i := strings.Index(lower, n); i >= 0; {
				end := i + len(n)
				if (i == 0 || !isNameByte(lower[i-1])) && (end == len(lower) || !isNameByte(lower[end])) {
					return true
				}
				next := strings.Index(lower[i+1:], n)
				if next < 0 {
					break
				}
				i += 1 + next
			}
		}
	}
	return false
}

func isNameByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z'
}

// findIP returns the first IPv4 or IPv6 address in text, or "".
func findIP(text string) string {
	for _, tok := range strings.FieldsFunc(text, func(r rune) bool {
		return !(r == '.' || r == ':' || r == '%' || unicode.IsDigit(r) || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F')
	}) {
		tok = strings.Trim(tok, ".:")
		if strings.Count(tok, ".") == 3 || strings.Count(tok, ":") >= 2 {
			if _, err := netip.ParseAddr(tok); err == nil {
				return tok
			}
		}
	}
	return ""
}
