package payloadcodec

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
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
		require.Len(t, p.Metadata, 2, "only the encoding and the key ID are in clear")
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
	require.EqualError(t, err, "cannot read the payload key file: open "+filepath.Join(dir, "missing")+": no such file or directory")
	_, err = LoadKeyFile(dir)
	require.EqualError(t, err, "the payload key file "+dir+" is a directory")
	big := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(big, bytes.Repeat([]byte("#"), maxKeyFileBytes+1), 0o600))
	_, err = LoadKeyFile(big)
	require.ErrorContains(t, err, "is larger than 1 MiB")
}

func TestExplain(t *testing.T) {
	ke := &KeyError{KeyID: "k1", Reason: ReasonNoKeyFile}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"own error, wrapped", fmt.Errorf("query the status: %w", ke), ke.Error()},
		{"worker's query failure", errors.New("unable to decode the input for queryType: progress, with error: " + ke.Error()), "the worker reports: " + ke.Error()},
		{"worker's workflow failure", errors.New("workflow execution error (type: Investigation, workflowID: w, runID: r): " + ke.Error() + " (type: KeyError, retryable: true)"), "the worker reports: " + ke.Error()},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg, ok := Explain(c.err)
			require.True(t, ok)
			require.Equal(t, c.want, msg)
		})
	}
	for _, err := range []error{nil, errors.New("context deadline exceeded")} {
		_, ok := Explain(err)
		require.False(t, ok)
	}
}
