package payloadcodec

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

const uiOrigin = "http://localhost:8233"

func codecServer(t *testing.T, keys *Keys, token string, log io.Writer) *httptest.Server {
	t.Helper()
	if log == nil {
		log = io.Discard
	}
	srv := httptest.NewServer(NewHandler(ServerOptions{
		Codec:     NewCodec(keys),
		Namespace: "default",
		Origins:   []string{uiOrigin},
		Token:     token,
		Logger:    slog.New(slog.NewTextHandler(log, nil)),
	}))
	t.Cleanup(srv.Close)
	return srv
}

// post sends Payloads as protojson, the way the Web UI and the CLI do.
func post(t *testing.T, url string, payloads []*commonpb.Payload, header map[string]string) (*http.Response, string) {
	t.Helper()
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: payloads})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func unmarshal(t *testing.T, body string) []*commonpb.Payload {
	t.Helper()
	var ps commonpb.Payloads
	require.NoError(t, protojson.Unmarshal([]byte(body), &ps), body)
	return ps.Payloads
}

func TestServerRoundTripOverHTTP(t *testing.T) {
	keys := mustKeys(t, "k1:"+newKey(t))
	srv := codecServer(t, keys, "", nil)
	plain := jsonPayload(t, secret)

	resp, body := post(t, srv.URL+"/encode", []*commonpb.Payload{plain}, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NotContains(t, body, "198.51.100.23")
	enc := unmarshal(t, body)
	require.Equal(t, EncodingEncrypted, string(enc[0].Metadata[converter.MetadataEncoding]))

	// The Web UI's form: X-Namespace on /decode; the CLI's: /{namespace}/decode.
	for _, c := range []struct {
		path   string
		header map[string]string
	}{
		{"/decode", map[string]string{"X-Namespace": "default", "Origin": uiOrigin}},
		{"/default/decode", nil},
	} {
		resp, body = post(t, srv.URL+c.path, enc, c.header)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		dec := unmarshal(t, body)
		require.True(t, proto.Equal(plain, dec[0]), c.path)
	}

	// The SDK's own remote codec client (what `temporal --codec-endpoint` does).
	remote := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{Endpoint: srv.URL + "/default"})
	dec, err := remote.Decode(enc)
	require.NoError(t, err)
	require.True(t, proto.Equal(plain, dec[0]))

	// A payload under a key this server lacks: 400 with the one sentence.
	other, err := NewCodec(mustKeys(t, "k9:"+newKey(t))).Encode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	resp, body = post(t, srv.URL+"/decode", other, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, `cannot decrypt a Temporal payload encrypted with key "k9": the payload key file keys.txt holds no key with that ID (it holds "k1")`, strings.TrimSpace(body))
}

func TestServerRoutes(t *testing.T) {
	srv := codecServer(t, mustKeys(t, "k1:"+newKey(t)), "", nil)
	p := []*commonpb.Payload{jsonPayload(t, "x")}
	for _, c := range []struct {
		path   string
		header map[string]string
		status int
	}{
		{"/other/decode", nil, http.StatusNotFound},
		{"/decode", map[string]string{"X-Namespace": "other"}, http.StatusNotFound},
		{"/a/b/decode", nil, http.StatusNotFound},
		{"/translate", nil, http.StatusNotFound},
		{"/default/encode", map[string]string{"X-Namespace": "default"}, http.StatusOK},
	} {
		resp, body := post(t, srv.URL+c.path, p, c.header)
		require.Equal(t, c.status, resp.StatusCode, "%s: %s", c.path, body)
	}
	resp, err := http.Get(srv.URL + "/decode")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	resp, err = http.Post(srv.URL+"/decode", "application/json", strings.NewReader("{not json"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

func preflight(t *testing.T, url, origin string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodOptions, url, nil)
	require.NoError(t, err)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type,x-namespace")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

func TestServerCORS(t *testing.T) {
	// The preflight carries no credentials: it passes even with a token set.
	srv := codecServer(t, mustKeys(t, "k1:"+newKey(t)), "s3cret", nil)
	resp := preflight(t, srv.URL+"/decode", uiOrigin)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	h := resp.Header
	require.Equal(t, uiOrigin, h.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "true", h.Get("Access-Control-Allow-Credentials"))
	require.Equal(t, "POST, OPTIONS", h.Get("Access-Control-Allow-Methods"))
	require.Equal(t, "Content-Type, X-Namespace, Authorization", h.Get("Access-Control-Allow-Headers"))
	require.Contains(t, h.Values("Vary"), "Origin")

	// Another origin gets no CORS grant, for the preflight or the request.
	resp = preflight(t, srv.URL+"/decode", "http://evil.example")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	resp, body := post(t, srv.URL+"/decode", nil, map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer s3cret"})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body, "origin http://evil.example is not allowed")

	// The real request from the UI's origin carries the grant.
	resp, _ = post(t, srv.URL+"/decode", nil, map[string]string{"Origin": uiOrigin, "Authorization": "Bearer s3cret"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, uiOrigin, resp.Header.Get("Access-Control-Allow-Origin"))
}

func TestServerToken(t *testing.T) {
	var log bytes.Buffer
	srv := codecServer(t, mustKeys(t, "k1:"+newKey(t)), "s3cret", &log)
	p := []*commonpb.Payload{jsonPayload(t, secret)}
	for _, auth := range []string{"", "Bearer wrong", "s3cret", "Basic s3cret", "Bearer s3cret2"} {
		resp, body := post(t, srv.URL+"/encode", p, map[string]string{"Authorization": auth})
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "Authorization %q", auth)
		require.Equal(t, `Bearer realm="codec"`, resp.Header.Get("WWW-Authenticate"))
		require.Equal(t, "missing or wrong bearer token", strings.TrimSpace(body))
	}
	resp, body := post(t, srv.URL+"/encode", p, map[string]string{"Authorization": "Bearer s3cret"})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, EncodingEncrypted, string(unmarshal(t, body)[0].Metadata[converter.MetadataEncoding]))

	require.Contains(t, log.String(), "missing or wrong bearer token")
	require.NotContains(t, log.String(), "s3cret", "the token is never logged")
	require.NotContains(t, log.String(), "198.51.100.23", "payloads are never logged")
}
