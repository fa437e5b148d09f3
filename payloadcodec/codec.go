package payloadcodec

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/secops-agent/investigator/internal/clip"
)

// The metadata of an encrypted payload. The encoding and key ID carry the
// names Temporal's samples use; the binding is this codec's own.
const (
	// EncodingEncrypted is the "encoding" of an encrypted payload.
	EncodingEncrypted = "binary/encrypted"
	// MetadataKeyID names the key a payload was encrypted with.
	MetadataKeyID = "encryption-key-id"
	// MetadataBoundTo says what the payload's associated data binds it to
	// besides its key ID: "workflow:<namespace>/<workflow ID>",
	// "namespace:<namespace>" (the codec server's /encode) or "key" (nothing
	// else: what /encode and failures were bound to before). Payloads written
	// before binding existed lack it, and were sealed without associated data.
	MetadataBoundTo = "encryption-bound-to"
)

const (
	nonceSize = 12 // the GCM standard nonce
	// boundToKey binds a payload to its key ID only: what a codec that knows
	// neither workflow nor namespace writes, and what the codec server's
	// /encode and every failure wrote before. Only failures accept it in a
	// workflow (see Codec), since a history reader can copy those.
	boundToKey = "key"
	// boundToWorkflow starts the binding to one workflow.
	boundToWorkflow = "workflow:"
	// boundToNamespace starts the binding of the codec server's /encode: it
	// knows the namespace, not the workflow, and only a token holder asks.
	boundToNamespace = "namespace:"
	// aadLabel starts the associated data, so that it names this format.
	aadLabel = "investigator payload v2"
	// maxQuoted bounds what an error quotes of a payload's metadata.
	maxQuoted = 200
)

// associatedData is what AES-GCM authenticates besides the ciphertext: the
// format, the key ID and the binding, NUL-separated. Key IDs hold no NUL
// (keyIDPattern) and the binding comes last, so no two inputs give the same
// bytes.
func associatedData(keyID, boundTo string) []byte {
	return []byte(aadLabel + "\x00" + keyID + "\x00" + boundTo)
}

// scopeOf is the binding of payloads written in a serialization context: the
// namespace and workflow, for a workflow's own payloads (input, result,
// signals, queries, updates, children's as the child's) and its activities';
// "" when the context names no workflow. ns is the context's namespace.
func scopeOf(sc converter.SerializationContext) (scope, ns string) {
	var id string
	switch c := sc.(type) {
	case converter.WorkflowSerializationContext:
		ns, id = c.Namespace, c.WorkflowID
	case converter.ActivitySerializationContext:
		ns, id = c.Namespace, c.WorkflowID
	}
	if id == "" {
		return "", ""
	}
	return boundToWorkflow + ns + "/" + id, ns
}

// namespaceOf is the namespace a binding names, and whether it names one.
func namespaceOf(boundTo string) (string, bool) {
	if ns, ok := strings.CutPrefix(boundTo, boundToNamespace); ok {
		return ns, true
	}
	if rest, ok := strings.CutPrefix(boundTo, boundToWorkflow); ok {
		ns, _, found := strings.Cut(rest, "/")
		return ns, found
	}
	return "", false
}

// Codec is a converter.PayloadCodec: Encode replaces each payload by its
// AES-256-GCM encryption under the first key (random nonce per payload), with
// associated data that binds it to the key ID and, when the codec knows it,
// to the namespace and workflow it is written for (both also in the
// metadata, in clear, so that any key holder can decrypt it). Decode
// reverses it with the key the payload names.
//
// A codec that knows its workflow (given by the SDK through
// WithSerializationContext) also checks what it decodes: with keys, a plain
// payload, one sealed before binding existed, one bound to another workflow
// or namespace, and one bound to the key only are refused with a
// *RefusedError; one bound to its namespace (the codec server's /encode) is
// accepted. The failure converter's codec (ForFailures) also accepts one
// bound to the key only: failures were written so before they were bound,
// and recorded histories hold them. A codec that knows no workflow (a
// history reader) decrypts whatever its keys open and passes plain payloads
// through; the codec server's (ForNamespace) refuses payloads bound to
// another namespace.
//
// A Codec without keys encrypts nothing and refuses encrypted payloads with
// an error that says a key file is needed.
type Codec struct {
	keys      *Keys
	scope     string // what Encode binds to and Decode expects; "" unknown
	namespace string // the scope's namespace, or the one the codec server serves
	failures  bool   // also accept payloads bound to the key only (ForFailures)
}

var (
	_ converter.PayloadCodec                         = (*Codec)(nil)
	_ converter.PayloadCodecWithSerializationContext = (*Codec)(nil)
)

// NewCodec returns a codec over keys, or a decode-only one when keys is nil.
func NewCodec(keys *Keys) *Codec { return &Codec{keys: keys} }

// WithSerializationContext implements
// converter.PayloadCodecWithSerializationContext.
func (c *Codec) WithSerializationContext(sc converter.SerializationContext) converter.PayloadCodec {
	scope, ns := scopeOf(sc)
	return &Codec{keys: c.keys, scope: scope, namespace: ns, failures: c.failures}
}

// ForNamespace is the codec server's codec for one namespace: Encode binds
// to it ("namespace:<ns>"), Decode refuses payloads bound to another one.
func (c *Codec) ForNamespace(ns string) *Codec {
	return &Codec{keys: c.keys, namespace: ns}
}

// ForFailures is the codec of the failure converter: like c, but in a
// workflow it also accepts payloads bound to the key only, which every
// failure was before failures were bound to their workflow. A failure is
// never a signal or update argument, so accepting them here lets no one
// steer a workflow with a failure copied from a history.
func (c *Codec) ForFailures() *Codec {
	return &Codec{keys: c.keys, scope: c.scope, namespace: c.namespace, failures: true}
}

// Encode implements converter.PayloadCodec.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	if c.keys == nil {
		return payloads, nil
	}
	id := c.keys.EncryptKeyID()
	aead := c.keys.aead[id]
	boundTo := c.scope
	if boundTo == "" && c.namespace != "" {
		boundTo = boundToNamespace + c.namespace
	}
	boundTo = cmp.Or(boundTo, boundToKey)
	ad := associatedData(id, boundTo)
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("cannot encrypt a Temporal payload: %w", err)
		}
		sealed := make([]byte, nonceSize, nonceSize+len(plain)+aead.Overhead())
		if _, err := rand.Read(sealed); err != nil {
			return nil, fmt.Errorf("cannot encrypt a Temporal payload: no random nonce: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(EncodingEncrypted),
				MetadataKeyID:              []byte(id),
				MetadataBoundTo:            []byte(boundTo),
			},
			Data: aead.Seal(sealed, sealed, plain, ad),
		}
	}
	return out, nil
}

// Decode implements converter.PayloadCodec.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != EncodingEncrypted {
			if c.scope != "" && c.keys != nil {
				return nil, &RefusedError{Reason: RefusedPlain}
			}
			out[i] = p
			continue
		}
		d, err := c.decrypt(p)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

func (c *Codec) decrypt(p *commonpb.Payload) (*commonpb.Payload, error) {
	md := p.GetMetadata()
	id := string(md[MetadataKeyID])
	if id == "" {
		return nil, &KeyError{Reason: ReasonNoKeyID}
	}
	// No key file can hold such an ID (keyIDPattern), so no worker could
	// decrypt the payload: it is forged, and its ID is never quoted (a
	// refused signal's note would carry it whole). Before this check such a
	// payload panicked in workflow code (no key with that ID) or was refused;
	// a panic completes no workflow task, and no key could ever make one
	// complete, so no recorded history has commands after one: replay cannot
	// reach the change.
	if !keyIDPattern.MatchString(id) {
		return nil, &RefusedError{Reason: RefusedBadKeyID}
	}
	boundTo, bound := md[MetadataBoundTo]
	// What the metadata says decides a refusal before any key is tried, so
	// that every worker refuses the same payloads whatever keys it holds.
	if err := c.check(id, string(boundTo), bound); err != nil {
		return nil, err
	}
	if c.keys == nil {
		return nil, &KeyError{KeyID: id, Reason: ReasonNoKeyFile}
	}
	aead, ok := c.keys.aead[id]
	if !ok {
		return nil, &KeyError{KeyID: id, Reason: ReasonUnknownKey, Source: c.keys.source, Held: c.keys.IDs()}
	}
	data := p.GetData()
	if len(data) < nonceSize+aead.Overhead() {
		return nil, &KeyError{KeyID: id, Reason: ReasonDamaged, Source: c.keys.source}
	}
	var ad []byte // a payload from before binding was sealed without
	if bound {
		ad = associatedData(id, string(boundTo))
	}
	plain, err := aead.Open(nil, data[:nonceSize], data[nonceSize:], ad)
	if err != nil {
		return nil, &KeyError{KeyID: id, Reason: ReasonMismatch, Source: c.keys.source}
	}
	var d commonpb.Payload
	if err := proto.Unmarshal(plain, &d); err != nil {
		return nil, &KeyError{KeyID: id, Reason: ReasonDamaged, Source: c.keys.source}
	}
	return &d, nil
}

// check refuses a payload by its metadata alone (see Codec).
func (c *Codec) check(id, boundTo string, bound bool) error {
	if c.scope == "" {
		// A reader: only the codec server, serving one namespace, refuses
		// payloads bound to another one.
		if ns, ok := namespaceOf(boundTo); ok && c.namespace != "" && ns != c.namespace {
			return &RefusedError{Reason: RefusedElsewhere, KeyID: id, BoundTo: boundTo}
		}
		return nil
	}
	switch {
	case !bound:
		return &RefusedError{Reason: RefusedUnbound, KeyID: id}
	case boundTo == c.scope, boundTo == boundToNamespace+c.namespace:
		return nil
	case boundTo == boundToKey:
		if c.failures {
			return nil
		}
		return &RefusedError{Reason: RefusedKeyOnly, KeyID: id}
	}
	return &RefusedError{Reason: RefusedElsewhere, KeyID: id, BoundTo: boundTo}
}

// Refusal says why a codec that knows its workflow refused a payload.
type Refusal int

// The refusals a RefusedError gives.
const (
	RefusedPlain     Refusal = iota + 1 // not encrypted, though this process has keys
	RefusedUnbound                      // encrypted before payloads were bound (no associated data)
	RefusedElsewhere                    // bound to another workflow
	RefusedBadKeyID                     // its key ID is not one a key file can hold
	RefusedKeyOnly                      // bound to the key only, as failures were: anyone who reads a history can copy one
	RefusedMissing                      // none was sent where one is expected (DataConverter.FromPayloads)
)

// RefusedError is a payload that a process with keys will not use, whatever
// keys it holds: anyone who can call Temporal could have written it, or it
// was written for another workflow. A malformed key ID is refused by every
// codec, with keys or without. It is one sentence without secrets, and
// quotes at most maxQuoted bytes of each metadata value.
type RefusedError struct {
	Reason  Refusal
	KeyID   string // of an encrypted payload
	BoundTo string // RefusedElsewhere: the payload's binding
}

// Missing says whether err is the refusal of an input sent without a
// payload (RefusedMissing), which workers before it took as a zero value.
func Missing(err error) bool {
	var re *RefusedError
	return errors.As(err, &re) && re.Reason == RefusedMissing
}

func (e *RefusedError) Error() string {
	switch e.Reason {
	case RefusedPlain:
		return refusedPrefix + ": it is not encrypted, and with a payload key file only payloads encrypted with its keys are accepted"
	case RefusedUnbound:
		return fmt.Sprintf("%s: it is encrypted with key %s in the format from before payloads were bound to their workflow", refusedPrefix, quote(e.KeyID))
	case RefusedKeyOnly:
		return fmt.Sprintf("%s: it is encrypted with key %s for no workflow, as failures were before they were bound to theirs", refusedPrefix, quote(e.KeyID))
	case RefusedMissing:
		return refusedPrefix + ": it carries no payload, and with a payload key file every steering input must carry one encrypted with its keys"
	case RefusedBadKeyID:
		return refusedPrefix + ": it is marked encrypted with a key ID that no key file can hold (only letters, digits, '.', '_' and '-', at most 64 of them)"
	default:
		return fmt.Sprintf("%s: it is encrypted with key %s for another workflow (bound to %s)", refusedPrefix, quote(e.KeyID), quote(e.BoundTo))
	}
}

// refusedPrefix starts every RefusedError sentence (see decryptPrefix).
const refusedPrefix = "untrusted Temporal payload"

// Reason says why a payload could not be decrypted.
type Reason int

// The reasons a KeyError gives.
const (
	ReasonNoKeyFile  Reason = iota + 1 // this process has no key file
	ReasonUnknownKey                   // the key file has no key with that ID
	ReasonMismatch                     // a key with that ID exists but does not authenticate the payload
	ReasonDamaged                      // the ciphertext is cut short or does not hold a payload
	ReasonNoKeyID                      // the payload names no key
)

// KeyError is the one error a payload that cannot be decrypted produces: a
// single sentence naming the key ID, for the starter's user and the worker's
// log.
type KeyError struct {
	KeyID  string
	Reason Reason
	Source string   // the key file, when there is one
	Held   []string // the key IDs the file holds, for ReasonUnknownKey
}

func (e *KeyError) Error() string {
	what := fmt.Sprintf("%s encrypted with key %s", decryptPrefix, quote(e.KeyID))
	switch e.Reason {
	case ReasonNoKeyFile:
		return what + ": no payload key file is configured (set --payload-key-file or PAYLOAD_KEY_FILE)"
	case ReasonUnknownKey:
		return fmt.Sprintf("%s: the payload key file %s holds no key with that ID (it holds %s)", what, e.Source, quoteAll(e.Held))
	case ReasonMismatch:
		return fmt.Sprintf("%s: the key with that ID in %s does not match the one it was encrypted with (or the payload was altered)", what, e.Source)
	case ReasonDamaged:
		return what + ": the payload is damaged"
	default:
		return decryptPrefix + ": it is marked encrypted but names no key ID"
	}
}

func quoteAll(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = quote(id)
	}
	return strings.Join(q, ", ")
}

// quote quotes a value from a payload's metadata, which its sender chose,
// clipped to maxQuoted bytes.
func quote(s string) string { return strconv.Quote(clip.String(s, maxQuoted)) }

// decryptPrefix starts every KeyError sentence; Explain looks for it in
// errors that crossed the wire as text (query failures, workflow failures).
const decryptPrefix = "cannot decrypt a Temporal payload"

// appErrorSuffix is what a Temporal application error appends to its message.
var appErrorSuffix = regexp.MustCompile(`\s*\(type: [^()]*, retryable: (true|false)\)$`)

// Explain finds a payload that could not be decrypted or was refused behind
// err: this process's own KeyError or RefusedError, or one reported by the
// worker (whose failures carry the sentence in clear, see FailureConverter).
// A worker's is known by its structure, never by words anywhere in a text
// (a tool's or model's failure may hold any): a failure of type KeyError or
// RefusedError whose message is one such sentence, or a text (a query's or
// workflow task's failure) that ends with one after ": ". It returns the one
// sentence to show, and false when err is about something else.
func Explain(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	if own := payloadError(err); own != nil {
		return own.Error(), true
	}
	if app := (*temporal.ApplicationError)(nil); errors.As(err, &app) {
		// A failure: its type says what it is.
		for e := err; e != nil; e = errors.Unwrap(e) {
			if app, ok := e.(*temporal.ApplicationError); ok && (app.Type() == keyErrorType || app.Type() == refusedErrorType) &&
				wholeSentence.MatchString(app.Message()) {
				return "the worker reports: " + app.Message(), true
			}
		}
		return "", false
	}
	msg := appErrorSuffix.ReplaceAllString(err.Error(), "")
	if m := endingSentence.FindStringSubmatch(msg); m != nil {
		return "the worker reports: " + m[1], true
	}
	return "", false
}

// sentences is every KeyError and RefusedError sentence as a pattern: built
// from Error() with stand-ins for the quoted values, the key file and the
// list of held IDs, so that it follows the sentences as they change.
var sentences = func() string {
	const id, src, held = "\x00id\x00", "\x00src\x00", "\x00held\x00"
	quotedPat := `"(?:[^"\\]|\\.)*"`
	var errs []error
	for r := ReasonNoKeyFile; r <= ReasonNoKeyID; r++ {
		errs = append(errs, &KeyError{KeyID: id, Reason: r, Source: src, Held: []string{held}})
	}
	for r := RefusedPlain; r <= RefusedMissing; r++ {
		errs = append(errs, &RefusedError{Reason: r, KeyID: id, BoundTo: id})
	}
	alts := make([]string, len(errs))
	for i, e := range errs {
		p := regexp.QuoteMeta(e.Error())
		p = strings.ReplaceAll(p, regexp.QuoteMeta(quote(held)), "(?:"+quotedPat+"(?:, "+quotedPat+")*)?")
		p = strings.ReplaceAll(p, regexp.QuoteMeta(quote(id)), quotedPat)
		alts[i] = strings.ReplaceAll(p, regexp.QuoteMeta(src), ".+?")
	}
	return "(?:" + strings.Join(alts, "|") + ")"
}()

var (
	wholeSentence  = regexp.MustCompile(`^` + sentences + `$`)
	endingSentence = regexp.MustCompile(`(?:^|: )(` + sentences + `)$`)
)

// payloadError is the *KeyError or *RefusedError behind err, or nil.
func payloadError(err error) error {
	var ke *KeyError
	if errors.As(err, &ke) {
		return ke
	}
	var re *RefusedError
	if errors.As(err, &re) {
		return re
	}
	return nil
}
