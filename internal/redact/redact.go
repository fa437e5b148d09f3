// Package redact removes secrets (API keys) from text that leaves a client:
// error messages, and strings of a service's answer that reach the model or
// Temporal history. A service or proxy may quote a key back in another form
// than it was sent, so each secret is matched in the forms it realistically
// takes: as is (any letter case), JSON-escaped ("\/"), percent-encoded, and
// base64-encoded on its own or inside a longer base64 blob. JSON escapes of
// any other kind ("\u0074...") are undone by decoding: use JSON.
package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Mark replaces every occurrence of a secret.
const Mark = "[REDACTED]"

// minBase64Len is the shortest secret whose base64 forms are matched: a
// shorter fragment could match unrelated base64 text.
const minBase64Len = 12

// Redactor removes a fixed set of secrets. The zero value and nil remove
// nothing.
type Redactor struct {
	re *regexp.Regexp
}

// New returns a Redactor for the non-empty secrets.
func New(secrets ...string) *Redactor {
	var folded, exact []string
	for _, s := range secrets {
		if s == "" {
			continue
		}
		folded = append(folded, s, strings.ReplaceAll(s, "/", `\/`), url.QueryEscape(s), url.PathEscape(s))
		if len(s) >= minBase64Len {
			exact = append(exact, base64Forms(s)...)
		}
	}
	if len(folded) == 0 {
		return &Redactor{}
	}
	alt := func(forms []string) string {
		forms = slices.Compact(slices.SortedFunc(slices.Values(forms), func(a, b string) int {
			if len(a) != len(b) {
				return len(b) - len(a) // longest first: leftmost-first alternation prefers it
			}
			return strings.Compare(a, b)
		}))
		q := make([]string, len(forms))
		for i, f := range forms {
			q[i] = regexp.QuoteMeta(f)
		}
		return strings.Join(q, "|")
	}
	pattern := "(?i:" + alt(folded) + ")"
	if len(exact) > 0 {
		pattern += "|" + alt(exact)
	}
	return &Redactor{re: regexp.MustCompile(pattern)}
}

// base64Forms returns the text that base64 of a secret always contains,
// whatever bytes come before or after it: for each of the three alignments
// of the secret within the 3-byte groups, and in the standard and URL
// alphabets, the characters encoding only the secret's bits.
func base64Forms(secret string) []string {
	var forms []string
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for pad := range 3 {
			src := append(make([]byte, pad), secret...)
			full := len(src) / 3 * 4 // characters of complete groups: no bits of what follows
			skip := []int{0, 2, 3}[pad]
			if s := enc.EncodeToString(src); full > skip {
				forms = append(forms, s[skip:full])
			}
		}
	}
	return forms
}

// String returns s with every secret replaced by Mark.
func (r *Redactor) String(s string) string {
	if r == nil || r.re == nil {
		return s
	}
	return r.re.ReplaceAllLiteralString(s, Mark)
}

// Error returns err itself when its text holds no secret, and otherwise an
// error with the redacted text (the chain is dropped: a wrapped error could
// still print the secret).
func (r *Redactor) Error(err error) error {
	if err == nil || r == nil || r.re == nil {
		return err
	}
	msg := err.Error()
	if !r.re.MatchString(msg) {
		return err
	}
	return errors.New(r.String(msg))
}

// JSON decodes a JSON document, redacts every string in it (object keys
// included) and encodes it again, so that a secret hidden behind JSON
// escapes ("\u0074est-key") is found in its decoded form. It fails when body
// is not one JSON value.
func (r *Redactor) JSON(body []byte) ([]byte, error) {
	// Without escapes every decoded string is a substring of the raw text:
	// when the raw text holds no secret, neither does any string.
	if r == nil || r.re == nil || (!bytes.ContainsRune(body, '\\') && !r.re.Match(body)) {
		var raw json.RawMessage
		if err := json.Unmarshal(body, &raw); err != nil {
			return nil, err
		}
		return body, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numbers go back out exactly as they came
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the top-level value")
	}
	return json.Marshal(r.value(v))
}

func (r *Redactor) value(v any) any {
	switch x := v.(type) {
	case string:
		return r.String(x)
	case []any:
		for i := range x {
			x[i] = r.value(x[i])
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[r.String(k)] = r.value(e)
		}
		return out
	}
	return v
}
