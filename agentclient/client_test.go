package agentclient

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/payloadcodec"
)

func keyFile(t *testing.T, id string) string {
	t.Helper()
	b := make([]byte, payloadcodec.KeySize)
	_, err := rand.Read(b)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "payload.keys")
	require.NoError(t, os.WriteFile(p, []byte(id+":"+base64.StdEncoding.EncodeToString(b)+"\n"), 0o600))
	return p
}

func loadKeys(t *testing.T, path string) *payloadcodec.Keys {
	t.Helper()
	k, err := PayloadKeys(config.Temporal{PayloadKeyFile: path})
	require.NoError(t, err)
	return k
}

// TestFailureMessagesEncrypted: with a key file, an error's message and
// stack trace travel encrypted; only a holder of the key reads them back.
func TestFailureMessagesEncrypted(t *testing.T) {
	const secret = "tool result for 198.51.100.23: 41 failed logins"
	keys := loadKeys(t, keyFile(t, "k1"))
	_, fc := Converters(keys, nil)
	f := fc.ErrorToFailure(temporal.NewApplicationError(secret, "ToolFailed"))
	require.Equal(t, "Encoded failure", f.GetMessage())
	require.Empty(t, f.GetStackTrace())
	raw, err := proto.Marshal(f)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "198.51.100.23", "the failure as stored in history")
	require.Contains(t, string(raw), "ToolFailed", "the error type stays plain, for retry policies")

	var app *temporal.ApplicationError
	// FailureToError decodes the failure in place: give it copies.
	back := fc.FailureToError(proto.Clone(f).(*failurepb.Failure))
	require.True(t, errors.As(back, &app))
	require.Equal(t, secret, app.Message())

	// Another key reads nothing; without keys, failures stay in clear.
	_, other := Converters(loadKeys(t, keyFile(t, "k2")), nil)
	require.Equal(t, "Encoded failure (type: ToolFailed, retryable: true)", other.FailureToError(proto.Clone(f).(*failurepb.Failure)).Error())
	_, plain := Converters(nil, nil)
	require.Equal(t, secret, plain.ErrorToFailure(errors.New(secret)).GetMessage())
}

func TestPayloadKeyFileFlagAndErrors(t *testing.T) {
	t.Setenv("PAYLOAD_KEY_FILE", "/etc/investigator/payload.keys")
	var tc config.Temporal
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	tc.Flags(fs)
	require.NoError(t, fs.Parse(nil))
	require.Equal(t, "/etc/investigator/payload.keys", tc.PayloadKeyFile)

	k, err := PayloadKeys(config.Temporal{})
	require.NoError(t, err)
	require.Nil(t, k, "no key file, no keys: payloads stay in clear")
	_, err = DialTemporal(config.Temporal{Address: "localhost:1", PayloadKeyFile: filepath.Join(t.TempDir(), "none")}, nil, nil)
	require.ErrorContains(t, err, "cannot read the payload key file")
}

// TestKeyErrorsTravelInClear: the sentence saying a payload cannot be
// decrypted is no secret and is what a process without the key must read,
// so its failure is left in clear, holds nothing else, and is logged once.
func TestKeyErrorsTravelInClear(t *testing.T) {
	worker := loadKeys(t, keyFile(t, "worker-key"))
	_, starterKeys := Converters(loadKeys(t, keyFile(t, "starter-key")), nil)
	encrypted, err := payloadcodec.NewDataConverter(loadKeys(t, keyFile(t, "starter-key")), nil).ToPayload("Investigate guardduty-1: SSH brute force")
	require.NoError(t, err)
	var in string
	decodeErr := payloadcodec.NewDataConverter(worker, nil).FromPayload(encrypted, &in)
	require.Error(t, decodeErr)
	// As the SDK wraps it when a workflow's input cannot be decoded.
	wrapped := fmt.Errorf("unable to decode the workflow function input payload with error: %w, function name: Investigation", decodeErr)

	var log bytes.Buffer
	_, fc := Converters(worker, slog.New(slog.NewTextHandler(&log, nil)))
	f := fc.ErrorToFailure(wrapped)
	want := `cannot decrypt a Temporal payload encrypted with key "starter-key": the payload key file ` + worker.Source() + ` holds no key with that ID (it holds "worker-key")`
	require.Equal(t, want, f.GetMessage())
	require.Nil(t, f.GetEncodedAttributes())
	fc.ErrorToFailure(wrapped)
	require.Equal(t, 1, strings.Count(log.String(), "\n"), "logged once: %s", log.String())
	require.Contains(t, log.String(), `level=ERROR msg="cannot decrypt a Temporal payload encrypted with key \"starter-key\"`)

	// The starter, with its other key, reads the sentence and shows it alone.
	msg, ok := payloadcodec.Explain(starterKeys.FailureToError(f))
	require.True(t, ok)
	require.Equal(t, "the worker reports: "+want, msg)
}

func TestTemporalTLSNeedsCertAndKey(t *testing.T) {
	t.Setenv("TEMPORAL_API_KEY", "")
	_, err := DialTemporal(config.Temporal{Address: "localhost:1", CertPath: "/c.pem"}, nil, nil)
	require.ErrorContains(t, err, "needs both")
}
