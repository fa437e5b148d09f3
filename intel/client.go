package intel

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/redact"
	"github.com/secops-agent/investigator/internal/upstream"
	"github.com/secops-agent/investigator/tools"
)

// maxBody bounds how much of a provider response is read.
const maxBody = 8 << 20

// maxErrorText bounds the provider's own words quoted in an error.
const maxErrorText = 300

// client is one provider's HTTP access: base URL, auth header and display name.
type client struct {
	name    string // as shown to users: "VirusTotal"
	baseURL string
	header  string // auth header name
	key     string
	secrets *redact.Redactor // the key, in every form a provider may quote it
	http    *http.Client
}

// newClient builds a provider's client on a copy of hc (a 30-second client
// when nil) that refuses redirects to another host: the API key header goes
// with every request the client sends.
func newClient(name, header string, p Provider, def string, hc *http.Client) *client {
	base := strings.TrimRight(p.BaseURL, "/")
	if base == "" {
		base = def
	}
	h := http.Client{Timeout: 30 * time.Second}
	if hc != nil {
		h = *hc
	}
	h.CheckRedirect = sameHostOnly(h.CheckRedirect)
	return &client{name: name, baseURL: base, header: header, key: p.APIKey, secrets: redact.New(p.APIKey), http: &h}
}

// redirectError is a redirect refused because it leaves the provider's host.
type redirectError struct{ to string }

func (e *redirectError) Error() string { return "redirect to another host (" + e.to + ") refused" }

// sameHostOnly allows a redirect only to the host (and port) of the first
// request, and never from https to http, then applies next (Go's default
// of at most 10 redirects when nil).
func sameHostOnly(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		downgrade := first.Scheme == "https" && req.URL.Scheme != "https"
		if !strings.EqualFold(req.URL.Host, first.Host) || downgrade {
			return &redirectError{to: req.URL.Scheme + "://" + req.URL.Host}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// get calls GET base+path?query with the API key header and decodes the JSON
// answer into out (a pointer to a type whose lists and maps are list, dict,
// or otherwise bounded: bounded.go), with the key redacted from every string
// kept. Failures:
//   - an HTTP error status: an *upstream.Error of the status's kind (404
//     NotFound, 401/403 CredentialsRejected, 429 RateLimited with the
//     Retry-After, other 4xx BadRequest, 5xx Unavailable);
//   - no answer: an *upstream.Error, Timeout or Unavailable;
//   - a redirect to another host: a tools.Rejection naming the provider;
//   - an answer over maxBody: a tools.Rejection (the same question gets the
//     same answer);
//   - an answer that is not JSON: a plain error (retried).
func (c *client) get(ctx context.Context, path string, query url.Values, out any) error {
	u := c.baseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return tools.Reject("cannot build the %s request: %v", c.name, c.secrets.Error(err))
	}
	req.Header.Set(c.header, c.key)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return c.transportError(err)
	}
	defer resp.Body.Close()
	body, err := readBody(resp.Body, resp.ContentLength, maxBody)
	if err != nil {
		return c.transportError(fmt.Errorf("read the response: %w", err))
	}
	if code := resp.StatusCode; code < 200 || code > 299 {
		return c.statusError(code, resp.Header.Get("Retry-After"), body)
	}
	if len(body) > maxBody {
		// The provider would answer the same way again: not worth a retry.
		return tools.Reject("%s answered with more than %d MiB; ask for a narrower section or one indicator", c.name, maxBody>>20)
	}
	// Decoded straight into out's typed fields, whose lists and maps are
	// capped (bounded.go): never into map[string]any, which would cost many
	// times the body. The key is then redacted from what was kept.
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s answered with invalid JSON: %w", c.name, err)
	}
	redactAll(c.secrets, reflect.ValueOf(out))
	return nil
}

// readBody reads at most limit+1 bytes of r. It allocates what it reads
// once when length (Content-Length, -1 when unknown) is right, and twice
// otherwise (growing chunks, then one copy): never the sum of a buffer's
// doublings, several times the body.
func readBody(r io.Reader, length int64, limit int) ([]byte, error) {
	r = io.LimitReader(r, int64(limit)+1)
	size := 32 << 10
	if length >= 0 && length <= int64(limit) {
		size = int(length) + 1 // the +1 sees an answer longer than announced
	}
	var chunks [][]byte
	total := 0
	for {
		c := make([]byte, size)
		n, err := io.ReadFull(r, c)
		chunks, total = append(chunks, c[:n]), total+n
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, err
		}
		size = min(2*size, 1<<20)
	}
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	body := make([]byte, 0, total)
	for _, c := range chunks {
		body = append(body, c...)
	}
	return body, nil
}

// statusError classifies an HTTP error status.
func (c *client) statusError(code int, retryAfter string, body []byte) error {
	kind, ok := upstream.StatusKind(code)
	switch {
	case !ok && code >= 400 && code < 500:
		kind = upstream.BadRequest
	case !ok:
		kind = upstream.Unavailable // a redirect not followed, an unknown status
	}
	e := &upstream.Error{Service: c.name, Kind: kind, Status: code}
	if kind.Retryable() {
		e.RetryAfter = upstream.ParseRetryAfter(retryAfter, time.Now())
	}
	switch kind {
	case upstream.NotFound:
		e.Message = fmt.Sprintf("%s has no data for this (HTTP 404)", c.name)
	case upstream.CredentialsRejected:
		e.Message = fmt.Sprintf("API key rejected by %s (HTTP %d); check its API key setting", c.name, code)
	case upstream.RateLimited:
		e.Message = fmt.Sprintf("%s rate limit reached (HTTP 429)", c.name)
	case upstream.BadRequest:
		e.Message = fmt.Sprintf("%s refused the request (HTTP %d): %s", c.name, code, c.errorText(body))
	case upstream.Timeout:
		e.Message = fmt.Sprintf("%s timed out (HTTP %d): %s", c.name, code, c.errorText(body))
	default:
		e.Message = fmt.Sprintf("%s is unavailable (HTTP %d): %s", c.name, code, c.errorText(body))
	}
	return e
}

// transportError classifies a request that got no answer.
func (c *client) transportError(err error) error {
	var re *redirectError
	if errors.As(err, &re) {
		return tools.Reject("%s redirected the request to another host (%s); refused, so that its API key is not sent there",
			c.name, clip.String(re.to, 100))
	}
	cause := c.secrets.Error(err)
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s request cancelled: %w", c.name, cause) // recognisable as cancellation
	}
	e := &upstream.Error{Service: c.name, Kind: upstream.Unavailable, Message: fmt.Sprintf("%s request failed: %v", c.name, cause), Cause: cause}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		e.Kind, e.Message = upstream.Timeout, fmt.Sprintf("%s did not answer in time: %v", c.name, cause)
	}
	return e
}

// errorText is the short error text of a provider's error body, without the
// API key (a provider or a proxy may quote the request back). The body is
// never decoded whole: message decodes the few strings it quotes, JSON
// escapes undone, and the redactor sees them decoded.
func (c *client) errorText(body []byte) string {
	text, ok := message(body)
	if !ok {
		text = c.rawErrorText(body)
	}
	return clip.String(c.secrets.String(text), maxErrorText)
}

// maxDecodedErrorBody bounds an error body decoded whole to redact the key
// behind its JSON escapes: decoding costs many times the body.
const maxDecodedErrorBody = 64 << 10

// rawErrorText is an error body with no message field, as text. In JSON, an
// escape ("\u0074") can hide the key from the redactor: a short body is
// decoded to redact it, a long one is not quoted.
func (c *client) rawErrorText(body []byte) string {
	if !json.Valid(body) || !bytes.ContainsRune(body, '\\') {
		return strings.TrimSpace(string(body))
	}
	if len(body) <= maxDecodedErrorBody {
		if clean, err := c.secrets.JSON(body); err == nil {
			return string(clean)
		}
	}
	return fmt.Sprintf("an error reply of %d bytes without a message", len(body))
}

// message extracts the error text from a provider's error body, decoding
// only the fields it quotes; ok is false when there is none.
func message(body []byte) (text string, ok bool) {
	var e struct {
		Error   errorField                            `json:"error"`
		Message scalar                                `json:"message"`
		Detail  scalar                                `json:"detail"`
		Errors  list[struct{ Detail scalar }, upTo10] `json:"errors"`
	}
	if json.Unmarshal(body, &e) != nil {
		return "", false
	}
	first := scalar("")
	if len(e.Errors.Items) > 0 {
		first = e.Errors.Items[0].Detail
	}
	text = string(cmp.Or(e.Message, e.Detail, first, scalar(e.Error)))
	return text, text != ""
}

// errorField is an error body's "error": a string, or an object's message
// (scalar); anything else is empty. An object's other members are skipped,
// not decoded.
type errorField scalar

func (f *errorField) UnmarshalJSON(b []byte) error {
	*f = ""
	var s scalar
	if len(b) > 0 && b[0] == '{' {
		var o struct{ Message scalar }
		if json.Unmarshal(b, &o) != nil {
			return nil
		}
		s = o.Message
	} else if s.UnmarshalJSON(b) != nil {
		return nil
	}
	*f = errorField(s)
	return nil
}
