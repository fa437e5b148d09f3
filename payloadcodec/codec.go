package payloadcodec

import (
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// The metadata of an encrypted payload, with the names Temporal's samples use
// in every SDK language, so their codec servers and ours read each other's
// payloads.
const (
	// EncodingEncrypted is the "encoding" of an encrypted payload.
	EncodingEncrypted = "binary/encrypted"
	// MetadataKeyID names the key a payload was encrypted with.
	MetadataKeyID = "encryption-key-id"
)

const nonceSize = 12 // the GCM standard nonce

// Codec is a converter.PayloadCodec: Encode replaces each payload by its
// AES-256-GCM encryption under the first key (random nonce per payload);
// Decode reverses it with the key the payload names and leaves unencrypted
// payloads as they are, so histories written before encryption stay readable.
// A Codec without keys encrypts nothing and refuses encrypted payloads with
// an error that says a key file is needed.
type Codec struct {
	keys *Keys
}

var _ converter.PayloadCodec = (*Codec)(nil)

// NewCodec returns a codec over keys, or a decode-only one when keys is nil.
func NewCodec(keys *Keys) *Codec { return &Codec{keys: keys} }

// Encode implements converter.PayloadCodec.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	if c.keys == nil {
		return payloads, nil
	}
	id := c.keys.EncryptKeyID()
	aead := c.keys.aead[id]
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
			},
			Data: aead.Seal(sealed, sealed, plain, nil),
		}
	}
	return out, nil
}

// Decode implements converter.PayloadCodec.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != EncodingEncrypted {
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
	id := string(p.GetMetadata()[MetadataKeyID])
	if id == "" {
		return nil, &KeyError{Reason: ReasonNoKeyID}
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
	plain, err := aead.Open(nil, data[:nonceSize], data[nonceSize:], nil)
	if err != nil {
		return nil, &KeyError{KeyID: id, Reason: ReasonMismatch, Source: c.keys.source}
	}
	var d commonpb.Payload
	if err := proto.Unmarshal(plain, &d); err != nil {
		return nil, &KeyError{KeyID: id, Reason: ReasonDamaged, Source: c.keys.source}
	}
	return &d, nil
}

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
	what := fmt.Sprintf("%s encrypted with key %q", decryptPrefix, e.KeyID)
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
		q[i] = fmt.Sprintf("%q", id)
	}
	return strings.Join(q, ", ")
}

// decryptPrefix starts every KeyError sentence; Explain looks for it in
// errors that crossed the wire as text (query failures, workflow failures).
const decryptPrefix = "cannot decrypt a Temporal payload"

// appErrorSuffix is what a Temporal application error appends to its message.
var appErrorSuffix = regexp.MustCompile(`\s*\(type: [^()]*, retryable: (true|false)\)$`)

// Explain finds a payload that could not be decrypted behind err: this
// process's own KeyError, or one reported by the worker (whose failures
// carry the sentence in clear, see FailureConverter). It returns the one
// sentence to show, and false when err is about something else.
func Explain(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	var ke *KeyError
	if errors.As(err, &ke) {
		return ke.Error(), true
	}
	msg := err.Error()
	if i := strings.Index(msg, decryptPrefix); i >= 0 {
		msg = appErrorSuffix.ReplaceAllString(msg[i:], "")
		return "the worker reports: " + strings.TrimSpace(msg), true
	}
	return "", false
}
