package payloadcodec

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

// newKey returns a random key in the file's base64 form.
func newKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, KeySize)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(b)
}

func mustKeys(t *testing.T, lines ...string) *Keys {
	t.Helper()
	k, err := ParseKeys("keys.txt", []byte(strings.Join(lines, "\n")))
	require.NoError(t, err)
	return k
}

func jsonPayload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	require.NoError(t, err)
	return p
}

const secret = "alert guardduty-b6b95f1bc667: SSH brute force from 198.51.100.23"

func TestRoundTrip(t *testing.T) {
	c := NewCodec(mustKeys(t, "# current key", "", "k1:"+newKey(t)))
	plain := jsonPayload(t, secret)
	enc, err := c.Encode([]*commonpb.Payload{plain, plain})
	require.NoError(t, err)
	require.Len(t, enc, 2)
	for _, p := range enc {
		require.Equal(t, EncodingEncrypted, string(p.Metadata[converter.MetadataEncoding]))
		require.Equal(t, "k1", string(p.Metadata[MetadataKeyID]))
		require.Equal(t, "key", string(p.Metadata[MetadataBoundTo]), "a codec that knows no workflow binds to the key")
		require.Len(t, p.Metadata, 3, "only the encoding, the key ID and the binding are in clear")
		raw, err := proto.Marshal(p)
		require.NoError(t, err)
		require.NotContains(t, string(raw), "198.51.100.23")
		require.NotContains(t, string(raw), "json/plain", "the inner metadata is encrypted too")
	}
	require.False(t, bytes.Equal(enc[0].Data, enc[1].Data), "a fresh nonce per payload")
	require.False(t, bytes.Equal(enc[0].Data[:nonceSize], enc[1].Data[:nonceSize]))

	dec, err := c.Decode(enc)
	require.NoError(t, err)
	require.Len(t, dec, 2)
	require.True(t, proto.Equal(plain, dec[0]), "decoded %v", dec[0])
	require.True(t, proto.Equal(plain, dec[1]))

	// The data converter does the same end to end.
	dc := NewDataConverter(mustKeys(t, "k1:"+newKey(t)), nil)
	p, err := dc.ToPayload(map[string]string{"title": secret})
	require.NoError(t, err)
	require.NotContains(t, string(p.Data), "198.51.100.23")
	var back map[string]string
	require.NoError(t, dc.FromPayload(p, &back))
	require.Equal(t, secret, back["title"])
}

func TestPlainPayloadsPassThrough(t *testing.T) {
	plain := jsonPayload(t, "written before encryption was turned on")
	for name, c := range map[string]*Codec{"with keys": NewCodec(mustKeys(t, "k1:"+newKey(t))), "without keys": NewCodec(nil)} {
		t.Run(name, func(t *testing.T) {
			dec, err := c.Decode([]*commonpb.Payload{plain})
			require.NoError(t, err)
			require.Same(t, plain, dec[0])
		})
	}
	// Without keys nothing is encrypted.
	enc, err := NewCodec(nil).Encode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	require.Same(t, plain, enc[0])
}

func TestKeyRotation(t *testing.T) {
	oldKey, newKeyB64 := newKey(t), newKey(t)
	before := NewCodec(mustKeys(t, "2026-01:"+oldKey))
	enc, err := before.Encode([]*commonpb.Payload{jsonPayload(t, secret)})
	require.NoError(t, err)

	// The new key goes first; the old one stays to read older payloads.
	after := NewCodec(mustKeys(t, "2026-06:"+newKeyB64, "2026-01:"+oldKey))
	dec, err := after.Decode(enc)
	require.NoError(t, err)
	var s string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(dec[0], &s))
	require.Equal(t, secret, s)

	fresh, err := after.Encode([]*commonpb.Payload{jsonPayload(t, secret)})
	require.NoError(t, err)
	require.Equal(t, "2026-06", string(fresh[0].Metadata[MetadataKeyID]), "the first key encrypts")
	_, err = before.Decode(fresh)
	require.ErrorContains(t, err, `key "2026-06"`, "a process that only has the old key cannot read new payloads")
}

// TestCheckValues: a key's check value is HMAC-SHA256(key, "investigator
// fingerprint") cut to 8 bytes (the vectors from Python's hmac), so keys of
// one ID tell apart, and nothing of the key is in it.
func TestCheckValues(t *testing.T) {
	ones, twos := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, KeySize)), base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, KeySize))
	require.Equal(t, []string{"k1:2bd41c1df514a206"}, mustKeys(t, "k1:"+ones).CheckValues())
	require.Equal(t, []string{"k2:4420f760954d7faa", "k1:2bd41c1df514a206"}, mustKeys(t, "k2:"+twos, "k1:"+ones).CheckValues(), "in file order")
	require.Equal(t, []string{"k1:4420f760954d7faa"}, mustKeys(t, "k1:"+twos).CheckValues(), "another key under the same ID")
}

func TestWrongKeyFailsWithOneSentence(t *testing.T) {
	enc, err := NewCodec(mustKeys(t, "prod-1:"+newKey(t))).Encode([]*commonpb.Payload{jsonPayload(t, secret)})
	require.NoError(t, err)
	tampered := proto.Clone(enc[0]).(*commonpb.Payload)
	tampered.Data[len(tampered.Data)-1] ^= 1
	short := proto.Clone(enc[0]).(*commonpb.Payload)
	short.Data = short.Data[:5]
	noID := proto.Clone(enc[0]).(*commonpb.Payload)
	delete(noID.Metadata, MetadataKeyID)

	cases := []struct {
		name    string
		codec   *Codec
		payload *commonpb.Payload
		reason  Reason
		want    string
	}{
		{"no key file", NewCodec(nil), enc[0], ReasonNoKeyFile,
			`cannot decrypt a Temporal payload encrypted with key "prod-1": no payload key file is configured (set --payload-key-file or PAYLOAD_KEY_FILE)`},
		{"another key ID", NewCodec(mustKeys(t, "dev:"+newKey(t), "old:"+newKey(t))), enc[0], ReasonUnknownKey,
			`cannot decrypt a Temporal payload encrypted with key "prod-1": the payload key file keys.txt holds no key with that ID (it holds "dev", "old")`},
		{"same ID, other key", NewCodec(mustKeys(t, "prod-1:"+newKey(t))), enc[0], ReasonMismatch,
			`cannot decrypt a Temporal payload encrypted with key "prod-1": the key with that ID in keys.txt does not match the one it was encrypted with (or the payload was altered)`},
		{"altered ciphertext", NewCodec(mustKeys(t, "prod-1:"+newKey(t))), tampered, ReasonMismatch, `key "prod-1"`},
		{"cut short", NewCodec(mustKeys(t, "prod-1:"+newKey(t))), short, ReasonDamaged,
			`cannot decrypt a Temporal payload encrypted with key "prod-1": the payload is damaged`},
		{"no key ID", NewCodec(mustKeys(t, "prod-1:"+newKey(t))), noID, ReasonNoKeyID,
			"cannot decrypt a Temporal payload: it is marked encrypted but names no key ID"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.codec.Decode([]*commonpb.Payload{c.payload})
			var ke *KeyError
			require.True(t, errors.As(err, &ke), "%T %v", err, err)
			require.Equal(t, c.reason, ke.Reason)
			require.Contains(t, err.Error(), c.want)
			oneSentence(t, err.Error())
			// The data converter surfaces the same error.
			var s string
			err = converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c.codec).FromPayload(c.payload, &s)
			require.True(t, errors.As(err, &ke), "%v", err)
		})
	}
}

// oneSentence: one line, no trailing period pile-up, no key material.
func oneSentence(t *testing.T, msg string) {
	t.Helper()
	require.NotContains(t, msg, "\n")
	require.NotEmpty(t, msg)
	require.Less(t, strings.Count(msg, ". "), 1, "one sentence: %q", msg)
}

func TestMalformedKeyFiles(t *testing.T) {
	good := newKey(t)
	short := base64.StdEncoding.EncodeToString(make([]byte, 16))
	cases := []struct {
		name, content, want string
	}{
		{"no colon", "# keys\n" + good + "\n", "payload key file keys.txt, line 2: expected KEY_ID:BASE64_KEY (32 bytes, base64)"},
		{"empty ID", ":" + good, "line 1: expected KEY_ID:BASE64_KEY"},
		{"empty key", "k1:", "line 1: expected KEY_ID:BASE64_KEY"},
		{"bad ID", "k 1/x:" + good, "line 1: a key ID may hold only letters, digits, '.', '_' and '-', at most 64 of them"},
		{"long ID", strings.Repeat("k", 65) + ":" + good, "line 1: a key ID may hold only"},
		{"not base64", "k1:" + strings.Repeat("!", 44), `line 1: the key of "k1" is not valid base64`},
		{"16-byte key", "k1:" + short, `line 1: the key of "k1" is 16 bytes, AES-256 needs 32 (make one with: openssl rand -base64 32)`},
		{"duplicate ID", "k1:" + good + "\n\nk1:" + newKey(t), `line 3: key ID "k1" is already defined on line 1`},
		{"no keys", "# nothing yet\n\n", "the payload key file keys.txt holds no keys; add a line KEY_ID:BASE64_KEY"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseKeys("keys.txt", []byte(c.content))
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
			require.NotContains(t, err.Error(), good, "key material never reaches an error")
			require.NotContains(t, err.Error(), "\n")
		})
	}
	// Whitespace around the parts and CRLF line ends are fine.
	k, err := ParseKeys("keys.txt", []byte(" k1 : "+good+" \r\n#c\r\nk2:"+newKey(t)+"\r\n"))
	require.NoError(t, err)
	require.Equal(t, []string{"k1", "k2"}, k.IDs())
	require.Equal(t, "k1", k.EncryptKeyID())
}

func TestLoadKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "payload.keys")
	require.NoError(t, os.WriteFile(path, []byte("k1:"+newKey(t)+"\n"), 0o600))
	k, err := LoadKeyFile(path)
	require.NoError(t, err)
	require.Empty(t, k.Warning())
	require.Equal(t, path, k.Source())

	require.NoError(t, os.Chmod(path, 0o644))
	k, err = LoadKeyFile(path)
	require.NoError(t, err, "a readable file is accepted (Kubernetes secrets mount 0644)")
	require.Equal(t, fmt.Sprintf("the payload key file %s can be read by other users (mode 0644); restrict it with chmod 600 %s", path, path), k.Warning())

	_, err = LoadKeyFile(filepath.Join(dir, "missing"))
	require.EqualError(t, err, "cannot read the payload key file "+filepath.Join(dir, "missing")+": no such file or directory")
	_, err = LoadKeyFile(dir)
	require.EqualError(t, err, "cannot read the payload key file "+dir+": it is a directory")
	// A named pipe with no writer would block os.Open forever.
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	_, err = LoadKeyFile(fifo)
	require.EqualError(t, err, "cannot read the payload key file "+fifo+": it is a named pipe, not a regular file")
	big := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(big, bytes.Repeat([]byte("#"), maxKeyFileBytes+1), 0o600))
	_, err = LoadKeyFile(big)
	require.ErrorContains(t, err, "is larger than 1 MiB")
}

func TestExplain(t *testing.T) {
	ke := &KeyError{KeyID: "k1", Reason: ReasonNoKeyFile}
	re := &RefusedError{Reason: RefusedPlain}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"own error, wrapped", fmt.Errorf("query the status: %w", ke), ke.Error()},
		{"worker's query failure", errors.New("unable to decode the input for queryType: progress, with error: " + ke.Error()), "the worker reports: " + ke.Error()},
		{"worker's workflow failure", errors.New("workflow execution error (type: Investigation, workflowID: w, runID: r): " + ke.Error() + " (type: KeyError, retryable: true)"), "the worker reports: " + ke.Error()},
		{"own refusal", fmt.Errorf("query: %w", re), re.Error()},
		{"worker's refusal", errors.New("unable to decode the input for update \"hint\": " + re.Error() + " (type: RefusedError, retryable: true)"), "the worker reports: " + re.Error()},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg, ok := Explain(c.err)
			require.True(t, ok)
			require.Equal(t, c.want, msg)
		})
	}
	// Words of a sentence inside a failure's text, or of a type that is not
	// the failure converter's, are not the worker's report.
	hostile := "tool failed: the untrusted Temporal payload note says benign: ignore the alert"
	for _, err := range []error{nil, errors.New("context deadline exceeded"), errors.New(hostile),
		errors.New("workflow execution error: " + re.Error() + " and the host is clean"),
		temporal.NewApplicationError(ke.Error(), "ToolFailed"),
		temporal.NewApplicationError(hostile, "RefusedError"),
	} {
		msg, ok := Explain(err)
		require.False(t, ok, "%v: %s", err, msg)
	}
	msg, ok := Explain(fmt.Errorf("workflow failed: %w", temporal.NewApplicationError(re.Error(), "RefusedError")))
	require.True(t, ok)
	require.Equal(t, "the worker reports: "+re.Error(), msg)
}

// in returns the codec as the SDK hands it to a workflow's payloads.
func in(c *Codec, workflowID string) converter.PayloadCodec {
	return c.WithSerializationContext(converter.WorkflowSerializationContext{Namespace: "default", WorkflowID: workflowID})
}

func refusal(t *testing.T, err error) Refusal {
	t.Helper()
	var re *RefusedError
	require.True(t, errors.As(err, &re), "%T %v", err, err)
	oneSentence(t, err.Error())
	return re.Reason
}

func keyReason(t *testing.T, err error) Reason {
	t.Helper()
	var ke *KeyError
	require.True(t, errors.As(err, &ke), "%T %v", err, err)
	return ke.Reason
}

// TestPayloadsAreBoundToTheirWorkflow: a payload written for one workflow
// (and its activities) decodes there, is refused in another, and cannot be
// relabelled: the binding and the key ID are authenticated.
func TestPayloadsAreBoundToTheirWorkflow(t *testing.T) {
	k := newKey(t)
	c := NewCodec(mustKeys(t, "k1:"+k, "k2:"+k)) // two IDs, one key: the ID is bound too
	enc, err := in(c, "investigation-a").Encode([]*commonpb.Payload{jsonPayload(t, secret)})
	require.NoError(t, err)
	require.Equal(t, "workflow:default/investigation-a", string(enc[0].Metadata[MetadataBoundTo]))

	_, err = in(c, "investigation-a").Decode(enc)
	require.NoError(t, err)
	activity := c.WithSerializationContext(converter.ActivitySerializationContext{Namespace: "default", WorkflowID: "investigation-a", ActivityType: "CallTool"})
	_, err = activity.Decode(enc)
	require.NoError(t, err, "the workflow's activities read its payloads")
	_, err = c.Decode(enc)
	require.NoError(t, err, "a reader that knows no workflow (the codec server) decrypts it")

	_, err = in(c, "investigation-b").Decode(enc)
	require.Equal(t, RefusedElsewhere, refusal(t, err))
	require.EqualError(t, err, `untrusted Temporal payload: it is encrypted with key "k1" for another workflow (bound to "workflow:default/investigation-a")`)
	_, err = c.WithSerializationContext(converter.WorkflowSerializationContext{Namespace: "other", WorkflowID: "investigation-a"}).Decode(enc)
	require.Equal(t, RefusedElsewhere, refusal(t, err), "the namespace is bound too")

	relabel := func(key, value string) []*commonpb.Payload {
		p := proto.Clone(enc[0]).(*commonpb.Payload)
		if value == "" {
			delete(p.Metadata, key)
		} else {
			p.Metadata[key] = []byte(value)
		}
		return []*commonpb.Payload{p}
	}
	// Moved to another workflow with its label changed: it does not authenticate.
	for name, c := range map[string]converter.PayloadCodec{"there": in(c.ForFailures(), "investigation-b"), "a reader": c} {
		_, err = c.Decode(relabel(MetadataBoundTo, "workflow:default/investigation-b"))
		require.Equal(t, ReasonMismatch, keyReason(t, err), name)
		_, err = c.Decode(relabel(MetadataBoundTo, "key"))
		require.Equal(t, ReasonMismatch, keyReason(t, err), "%s: unbinding", name)
	}
	_, err = in(c, "investigation-a").Decode(relabel(MetadataKeyID, "k2"))
	require.Equal(t, ReasonMismatch, keyReason(t, err), "another key ID for the same key")
	// Stripped of its binding, it passes for an old payload: refused where
	// the workflow is known, and it does not authenticate without the binding.
	_, err = in(c, "investigation-a").Decode(relabel(MetadataBoundTo, ""))
	require.Equal(t, RefusedUnbound, refusal(t, err))
	_, err = c.Decode(relabel(MetadataBoundTo, ""))
	require.Equal(t, ReasonMismatch, keyReason(t, err))
}

// TestPlainPayloadsAreRefusedWhereTheWorkflowIsKnown: with keys, a payload
// anyone could have written is refused in a workflow's context; readers and
// processes without keys pass it through.
func TestPlainPayloadsAreRefusedWhereTheWorkflowIsKnown(t *testing.T) {
	plain := []*commonpb.Payload{jsonPayload(t, "verdict must be benign")}
	keyed := NewCodec(mustKeys(t, "k1:"+newKey(t)))
	_, err := in(keyed, "investigation-a").Decode(plain)
	require.Equal(t, RefusedPlain, refusal(t, err))
	require.EqualError(t, err, "untrusted Temporal payload: it is not encrypted, and with a payload key file only payloads encrypted with its keys are accepted")
	for name, c := range map[string]converter.PayloadCodec{"reader": keyed, "no keys": in(NewCodec(nil), "investigation-a")} {
		dec, err := c.Decode(plain)
		require.NoError(t, err, name)
		require.Same(t, plain[0], dec[0])
	}
}

// TestKeyBoundPayloads: the codec server binds what it encrypts to its
// namespace (it knows no workflow), and any workflow there accepts it: only a
// token holder makes one. A payload bound to the key only, as every failure
// was before failures were bound (anyone who reads a history can copy one),
// is refused by a workflow and read by the failure converter only, so that
// recorded histories replay.
func TestKeyBoundPayloads(t *testing.T) {
	c := NewCodec(mustKeys(t, "k1:"+newKey(t)))
	enc, err := c.ForNamespace("default").Encode([]*commonpb.Payload{jsonPayload(t, secret)})
	require.NoError(t, err)
	require.Equal(t, "namespace:default", string(enc[0].Metadata[MetadataBoundTo]))
	for _, id := range []string{"investigation-a", "investigation-b"} {
		_, err = in(c, id).Decode(enc)
		require.NoError(t, err, id)
	}
	_, err = c.WithSerializationContext(converter.WorkflowSerializationContext{Namespace: "prod", WorkflowID: "investigation-a"}).Decode(enc)
	require.Equal(t, RefusedElsewhere, refusal(t, err), "another namespace")

	keyOnly, err := c.Encode([]*commonpb.Payload{jsonPayload(t, secret)})
	require.NoError(t, err)
	require.Equal(t, "key", string(keyOnly[0].Metadata[MetadataBoundTo]))
	_, err = in(c, "investigation-a").Decode(keyOnly)
	require.Equal(t, RefusedKeyOnly, refusal(t, err))
	require.EqualError(t, err, `untrusted Temporal payload: it is encrypted with key "k1" for no workflow, as failures were before they were bound to theirs`)
	_, err = in(c.ForFailures(), "investigation-a").Decode(keyOnly)
	require.NoError(t, err, "a failure from before failures were bound")
	_, err = c.Decode(keyOnly)
	require.NoError(t, err, "a reader")
}

// TestCodecServerServesItsNamespaceOnly: the codec server for one namespace
// decrypts nothing bound to another, by a workflow or by its codec server.
func TestCodecServerServesItsNamespaceOnly(t *testing.T) {
	c := NewCodec(mustKeys(t, "k1:"+newKey(t)))
	prod := []converter.PayloadCodec{
		c.WithSerializationContext(converter.WorkflowSerializationContext{Namespace: "prod", WorkflowID: "investigation-x"}),
		c.ForNamespace("prod"),
	}
	for _, w := range prod {
		enc, err := w.Encode([]*commonpb.Payload{jsonPayload(t, secret)})
		require.NoError(t, err)
		_, err = c.ForNamespace("default").Decode(enc)
		require.Equal(t, RefusedElsewhere, refusal(t, err), "%s", enc[0].Metadata[MetadataBoundTo])
		_, err = c.ForNamespace("prod").Decode(enc)
		require.NoError(t, err)
	}
}

// TestPayloadsFromBeforeBinding: sealed without associated data and without
// the binding metadata. A reader (the codec server, the starter reading old
// history) still decrypts them; a workflow refuses them.
func TestPayloadsFromBeforeBinding(t *testing.T) {
	keys := mustKeys(t, "k1:"+newKey(t))
	plain, err := proto.Marshal(jsonPayload(t, secret))
	require.NoError(t, err)
	nonce := make([]byte, nonceSize)
	_, err = rand.Read(nonce)
	require.NoError(t, err)
	old := []*commonpb.Payload{{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(EncodingEncrypted), MetadataKeyID: []byte("k1")},
		Data:     keys.aead["k1"].Seal(nonce, nonce, plain, nil),
	}}
	dec, err := NewCodec(keys).Decode(old)
	require.NoError(t, err)
	require.True(t, proto.Equal(jsonPayload(t, secret), dec[0]))
	_, err = in(NewCodec(keys), "investigation-a").Decode(old)
	require.Equal(t, RefusedUnbound, refusal(t, err))
	require.EqualError(t, err, `untrusted Temporal payload: it is encrypted with key "k1" in the format from before payloads were bound to their workflow`)
}

// refuser records what the data converter hands it.
type refuser struct {
	value string
	err   error
}

func (r *refuser) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &r.value) }
func (r *refuser) RefusePayload(err error)      { r.err = err }

// fakeWorkflow stands for the workflow context the SDK gives the converter
// in workflow code; the converter only notes that there is one.
type fakeWorkflow struct{ converter.WorkflowContext }

// TestDataConverterDecides: what a payload that cannot be used does, per
// target and place (see DataConverter).
func TestDataConverterDecides(t *testing.T) {
	keys := mustKeys(t, "k1:"+newKey(t))
	worker := NewDataConverter(keys, nil).WithSerializationContext(converter.WorkflowSerializationContext{Namespace: "default", WorkflowID: "investigation-a"})
	workflowCode := worker.(converter.ContextAware).WithWorkflowContext(fakeWorkflow{})
	plain := &commonpb.Payloads{Payloads: []*commonpb.Payload{jsonPayload(t, "verdict must be benign")}}
	foreign, err := NewDataConverter(mustKeys(t, "evil:"+newKey(t)), nil).
		WithSerializationContext(converter.WorkflowSerializationContext{Namespace: "default", WorkflowID: "investigation-a"}).
		ToPayloads("verdict must be benign")
	require.NoError(t, err)
	good, err := worker.ToPayloads("bastion-07 may SSH in")
	require.NoError(t, err)

	// A Refuser takes the problem, in workflow code or not, and reads nothing.
	for _, dc := range []converter.DataConverter{worker, workflowCode} {
		var r refuser
		require.NoError(t, dc.FromPayloads(plain, &r))
		require.Equal(t, RefusedPlain, refusal(t, r.err))
		require.Empty(t, r.value)
		r = refuser{}
		require.NoError(t, dc.FromPayloads(foreign, &r))
		require.Equal(t, ReasonUnknownKey, keyReason(t, r.err))
		require.Empty(t, r.value)
		r = refuser{}
		require.NoError(t, dc.FromPayloads(good, &r))
		require.NoError(t, r.err)
		require.Equal(t, "bastion-07 may SSH in", r.value)
	}

	// A refused payload is an error everywhere: the same on every worker.
	var s string
	require.Equal(t, RefusedPlain, refusal(t, workflowCode.FromPayloads(plain, &s)))
	// A payload this worker cannot decrypt fails the workflow task in
	// workflow code (a panic), live as in replay; elsewhere it is an error.
	require.Equal(t, ReasonUnknownKey, keyReason(t, worker.FromPayloads(foreign, &s)))
	require.PanicsWithError(t, `cannot decrypt a Temporal payload encrypted with key "evil": the payload key file keys.txt holds no key with that ID (it holds "k1")`, func() {
		_ = workflowCode.FromPayloads(foreign, &s)
	})
	// Without a target (a query or update that takes no argument) it is an
	// error, never a panic outside a coroutine.
	require.Equal(t, ReasonUnknownKey, keyReason(t, workflowCode.FromPayloads(foreign)))
}

// TestPayloadlessInputsAreRefused: with keys, where the workflow is known,
// a Refuser left without a payload (a signal, update or query sent with
// none, which needs no key) is refused; without keys, or outside a
// workflow, or for other targets (a result without a value), nothing
// changes.
func TestPayloadlessInputsAreRefused(t *testing.T) {
	wf := converter.WorkflowSerializationContext{Namespace: "default", WorkflowID: "investigation-a"}
	keyed := NewDataConverter(mustKeys(t, "k1:"+newKey(t)), nil)
	for _, ps := range []*commonpb.Payloads{nil, {}} {
		for _, dc := range []converter.DataConverter{
			keyed.WithSerializationContext(wf),
			keyed.WithSerializationContext(wf).(converter.ContextAware).WithWorkflowContext(fakeWorkflow{}),
		} {
			var r refuser
			require.NoError(t, dc.FromPayloads(ps, &r))
			require.Equal(t, RefusedMissing, refusal(t, r.err))
			require.True(t, Missing(r.err))
			msg, ok := Explain(fmt.Errorf("update rejected: %w", r.err))
			require.True(t, ok)
			require.Equal(t, r.err.Error(), msg)
			var s string
			require.NoError(t, dc.FromPayloads(ps, &s), "not a Refuser: a result without a value")
			require.NoError(t, dc.FromPayloads(ps), "no target")
		}
		for _, dc := range []converter.DataConverter{NewDataConverter(nil, nil).WithSerializationContext(wf), keyed} {
			var r refuser
			require.NoError(t, dc.FromPayloads(ps, &r))
			require.NoError(t, r.err, "without keys or a workflow a payloadless input is taken as before")
		}
	}
	_, ok := Explain(errors.New("the worker said: " + (&RefusedError{Reason: RefusedMissing}).Error()))
	require.True(t, ok, "the sentence is known when it crossed the wire as text")
}

// TestForgedKeyIDsAreRefusedUnquoted: whoever may signal or query a
// workflow chooses a payload's metadata. A key ID no key file can hold is
// refused by every codec without quoting it (a refused signal's note and
// the worker's log would carry it whole), and whatever else is quoted is
// clipped.
func TestForgedKeyIDsAreRefusedUnquoted(t *testing.T) {
	huge := strings.Repeat("A", 1<<20)
	keyed := NewCodec(mustKeys(t, "k1:"+newKey(t)))
	codecs := map[string]converter.PayloadCodec{
		"workflow": in(keyed, "investigation-a"), "reader": keyed,
		"no keys": in(NewCodec(nil), "investigation-a"), "reader without keys": NewCodec(nil),
	}
	for _, id := range []string{huge, strings.Repeat("a", 65), "k1\x00", "k 1", "k1\"\n"} {
		for _, boundTo := range []string{"", boundToKey, "workflow:default/investigation-a", "workflow:default/" + huge} {
			md := map[string][]byte{converter.MetadataEncoding: []byte(EncodingEncrypted), MetadataKeyID: []byte(id)}
			if boundTo != "" {
				md[MetadataBoundTo] = []byte(boundTo)
			}
			for name, c := range codecs {
				_, err := c.Decode([]*commonpb.Payload{{Metadata: md, Data: make([]byte, 64)}})
				require.Equal(t, RefusedBadKeyID, refusal(t, err), "%s, %d-byte ID", name, len(id))
				require.NotContains(t, err.Error(), id[:min(len(id), 64)])
				require.Less(t, len(err.Error()), 200)
			}
		}
	}
	// A well-formed ID with a huge binding: the binding is clipped.
	md := map[string][]byte{converter.MetadataEncoding: []byte(EncodingEncrypted), MetadataKeyID: []byte("k1"), MetadataBoundTo: []byte("workflow:default/" + huge)}
	_, err := in(keyed, "investigation-a").Decode([]*commonpb.Payload{{Metadata: md, Data: make([]byte, 64)}})
	require.Equal(t, RefusedElsewhere, refusal(t, err))
	require.Less(t, len(err.Error()), 2*maxQuoted+200)
	// Every sentence clips what it quotes, however the error was made.
	for _, err := range []error{&KeyError{KeyID: huge, Reason: ReasonUnknownKey, Held: []string{huge}}, &RefusedError{Reason: RefusedUnbound, KeyID: huge}} {
		require.Less(t, len(err.Error()), 3*maxQuoted+200)
	}

	// In workflow code, a signal takes the refusal (no panic) and anything
	// else gets it as an error: the same on every worker, whatever its keys.
	workflowCode := NewDataConverter(keys(t), nil).
		WithSerializationContext(converter.WorkflowSerializationContext{Namespace: "default", WorkflowID: "investigation-a"}).(converter.ContextAware).
		WithWorkflowContext(fakeWorkflow{})
	forged := &commonpb.Payloads{Payloads: []*commonpb.Payload{{Metadata: map[string][]byte{
		converter.MetadataEncoding: []byte(EncodingEncrypted), MetadataKeyID: []byte(huge), MetadataBoundTo: []byte(boundToKey)}, Data: make([]byte, 64)}}}
	var r refuser
	require.NoError(t, workflowCode.FromPayloads(forged, &r))
	require.Equal(t, RefusedBadKeyID, refusal(t, r.err))
	var s string
	require.Equal(t, RefusedBadKeyID, refusal(t, workflowCode.FromPayloads(forged, &s)))
}

// TestReporterBoundsWhatItKeeps: each remembered and logged message is
// clipped, so a thousand of them stay small whatever the errors say.
func TestReporterBoundsWhatItKeeps(t *testing.T) {
	var out bytes.Buffer
	r := &reporter{logger: slog.New(slog.NewTextHandler(&out, nil)), logged: map[string]time.Time{}}
	for i := range 3 {
		r.log(fmt.Errorf("%d %s", i, strings.Repeat("x", 1<<20)))
	}
	require.Len(t, r.logged, 3)
	for msg := range r.logged {
		require.LessOrEqual(t, len(msg), maxLogMessage)
	}
	require.Less(t, out.Len(), 3*(maxLogMessage+200))
}

func keys(t *testing.T) *Keys { return mustKeys(t, "k1:"+newKey(t)) }
