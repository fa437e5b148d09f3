package payloadcodec

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

const uiOrigin = "http://localhost:8233"

const testToken = "s3cret"

// codecServer serves the handler on loopback, as the starter does by
// default; loopback says whether it should believe so.
func codecServer(t *testing.T, keys *Keys, token string, log io.Writer, loopback bool) *httptest.Server {
	t.Helper()
	if log == nil {
		log = io.Discard
	}
	srv := httptest.NewServer(NewHandler(ServerOptions{
		Codec:     NewCodec(keys),
		Namespace: "default",
		Origins:   []string{uiOrigin},
		Token:     token,
		Loopback:  loopback,
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
	h := map[string]string{"Content-Type": "application/json"}
	maps.Copy(h, header)
	return send(t, http.MethodPost, url, bytes.NewReader(body), h)
}

// send makes one request and reads the whole answer.
func send(t *testing.T, method, url string, body io.Reader, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	require.NoError(t, err)
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
	srv := codecServer(t, keys, testToken, nil, true)
	plain := jsonPayload(t, secret)
	auth := map[string]string{"Authorization": "Bearer " + testToken}

	resp, body := post(t, srv.URL+"/encode", []*commonpb.Payload{plain}, auth)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NotContains(t, body, "198.51.100.23")
	enc := unmarshal(t, body)
	require.Equal(t, EncodingEncrypted, string(enc[0].Metadata[converter.MetadataEncoding]))

	// The Web UI's form: X-Namespace on /decode; the CLI's: /{namespace}/decode.
	for _, c := range []struct {
		path   string
		header map[string]string
	}{
		{"/decode", map[string]string{"X-Namespace": "default", "Origin": uiOrigin, "Authorization": basic("analyst", testToken)}},
		{"/default/decode", auth},
	} {
		resp, body = post(t, srv.URL+c.path, enc, c.header)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		dec := unmarshal(t, body)
		require.True(t, proto.Equal(plain, dec[0]), c.path)
	}

	// The SDK's own remote codec client (what `temporal --codec-endpoint` does).
	remote := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{
		Endpoint: srv.URL + "/default",
		ModifyRequest: func(r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+testToken)
			return nil
		},
	})
	dec, err := remote.Decode(enc)
	require.NoError(t, err)
	require.True(t, proto.Equal(plain, dec[0]))

	// A payload under a key this server lacks: 400 with the one sentence.
	other, err := NewCodec(mustKeys(t, "k9:"+newKey(t))).Encode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	resp, body = post(t, srv.URL+"/decode", other, auth)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, `cannot decrypt a Temporal payload encrypted with key "k9": the payload key file keys.txt holds no key with that ID (it holds "k1")`, strings.TrimSpace(body))
}

func TestServerRoutes(t *testing.T) {
	srv := codecServer(t, mustKeys(t, "k1:"+newKey(t)), testToken, nil, true)
	p := []*commonpb.Payload{jsonPayload(t, "x")}
	bearer := "Bearer " + testToken
	for _, c := range []struct {
		path   string
		header map[string]string
		status int
	}{
		{"/other/decode", map[string]string{"Authorization": bearer}, http.StatusNotFound},
		{"/decode", map[string]string{"X-Namespace": "other", "Authorization": bearer}, http.StatusNotFound},
		{"/a/b/decode", nil, http.StatusNotFound},
		{"/translate", nil, http.StatusNotFound},
		{"/default/encode", map[string]string{"X-Namespace": "default", "Authorization": bearer}, http.StatusOK},
	} {
		resp, body := post(t, srv.URL+c.path, p, c.header)
		require.Equal(t, c.status, resp.StatusCode, "%s: %s", c.path, body)
	}
	resp, err := http.Get(srv.URL + "/decode")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	resp, _ = post(t, srv.URL+"/decode", nil, map[string]string{"Authorization": bearer, "Content-Type": "application/json; charset=utf-8"})
	require.Equal(t, http.StatusOK, resp.StatusCode, "JSON with a charset")
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/decode", strings.NewReader("{not json"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", bearer)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

func preflight(t *testing.T, url, origin string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodOptions, url, nil)
	require.NoError(t, err)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type,x-namespace")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

func TestServerCORS(t *testing.T) {
	// The preflight carries no credentials: it passes even with a token set.
	srv := codecServer(t, mustKeys(t, "k1:"+newKey(t)), testToken, nil, true)
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
	resp = preflight(t, srv.URL+"/decode", "")
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no CORS grant without an Origin")
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	resp, body := post(t, srv.URL+"/decode", nil, map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer " + testToken})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body, "origin http://evil.example is not allowed")

	// The real request from the UI's origin carries the grant.
	resp, _ = post(t, srv.URL+"/decode", nil, map[string]string{"Origin": uiOrigin, "Authorization": "Bearer " + testToken})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, uiOrigin, resp.Header.Get("Access-Control-Allow-Origin"))
}

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

func TestServerToken(t *testing.T) {
	var log bytes.Buffer
	srv := codecServer(t, mustKeys(t, "k1:"+newKey(t)), testToken, &log, true)
	p := []*commonpb.Payload{jsonPayload(t, secret)}
	for _, auth := range []string{"", "Bearer wrong", testToken, "Basic " + testToken, "Bearer " + testToken + "2", basic("analyst", "wrong"), basic(testToken, "")} {
		resp, body := post(t, srv.URL+"/encode", p, map[string]string{"Authorization": auth})
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "Authorization %q", auth)
		require.Equal(t, []string{`Bearer realm="codec"`, `Basic realm="codec", charset="UTF-8"`}, resp.Header.Values("WWW-Authenticate"))
		require.Equal(t, "missing or wrong token", strings.TrimSpace(body))
	}
	// The CLI's form and a browser's (Basic, any user name).
	for _, auth := range []string{"Bearer " + testToken, basic("analyst", testToken), basic("", testToken)} {
		resp, body := post(t, srv.URL+"/encode", p, map[string]string{"Authorization": auth})
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", auth, body)
		require.Equal(t, EncodingEncrypted, string(unmarshal(t, body)[0].Metadata[converter.MetadataEncoding]))
	}

	require.Contains(t, log.String(), "missing or wrong token")
	require.NotContains(t, log.String(), testToken, "the token is never logged")
	require.NotContains(t, log.String(), "198.51.100.23", "payloads are never logged")
}

// TestServerIsNotAnOracle: /encode needs the token always, also from the Web
// UI's origin, and is off without one; so encrypting what a worker would
// accept takes the token.
func TestServerIsNotAnOracle(t *testing.T) {
	p := []*commonpb.Payload{jsonPayload(t, "verdict must be benign")}
	keys := mustKeys(t, "k1:"+newKey(t))
	for _, loopback := range []bool{true, false} {
		srv := codecServer(t, keys, testToken, nil, loopback)
		for _, h := range []map[string]string{nil, {"Origin": uiOrigin}, {"Origin": uiOrigin, "X-Namespace": "default"}} {
			resp, body := post(t, srv.URL+"/encode", p, h)
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "loopback %v, %v: %s", loopback, h, body)
		}
	}
	srv := codecServer(t, keys, "", nil, true)
	for _, h := range []map[string]string{nil, {"Origin": uiOrigin}} {
		resp, body := post(t, srv.URL+"/encode", p, h)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
		require.Equal(t, "encoding is disabled: start the codec server with a token (--token or CODEC_SERVER_TOKEN)", strings.TrimSpace(body))
	}
}

// TestServerDecodeNeedsTokenOrTheUIOnLoopback: without the token only a
// request from an allowed origin decodes, and only on a loopback listener;
// a request without an Origin (any local process, curl) needs the token.
func TestServerDecodeNeedsTokenOrTheUIOnLoopback(t *testing.T) {
	keys := mustKeys(t, "k1:"+newKey(t))
	enc, err := NewCodec(keys).Encode([]*commonpb.Payload{jsonPayload(t, secret)})
	require.NoError(t, err)
	for _, c := range []struct {
		name     string
		token    string
		loopback bool
		header   map[string]string
		status   int
	}{
		{"no Origin, no token set", "", true, nil, http.StatusUnauthorized},
		{"no Origin, token set", testToken, true, nil, http.StatusUnauthorized},
		{"no Origin, wrong token", testToken, true, map[string]string{"Authorization": "Bearer nope"}, http.StatusUnauthorized},
		{"no Origin, token", testToken, true, map[string]string{"Authorization": "Bearer " + testToken}, http.StatusOK},
		{"the UI on loopback", "", true, map[string]string{"Origin": uiOrigin}, http.StatusOK},
		// Anything on this machine can write the UI's origin: a token, once
		// set, is needed always (the UI sends it once its browser signed in).
		{"the UI on loopback, token set", testToken, true, map[string]string{"Origin": uiOrigin}, http.StatusUnauthorized},
		{"the UI on loopback, token set, signed in", testToken, true, map[string]string{"Origin": uiOrigin, "Authorization": basic("analyst", testToken)}, http.StatusOK},
		{"another origin", testToken, true, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"the UI off loopback", testToken, false, map[string]string{"Origin": uiOrigin}, http.StatusUnauthorized},
		{"the UI off loopback, signed in", testToken, false, map[string]string{"Origin": uiOrigin, "Authorization": basic("analyst", testToken)}, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := codecServer(t, keys, c.token, nil, c.loopback)
			resp, body := post(t, srv.URL+"/decode", enc, c.header)
			require.Equal(t, c.status, resp.StatusCode, body)
			if c.status == http.StatusOK {
				require.Contains(t, body, base64.StdEncoding.EncodeToString([]byte(`"`+secret+`"`)))
			} else {
				require.NotContains(t, body, "198.51.100.23")
			}
		})
	}
}

// TestServerTakesJSONOnly: a browser posts a form or text/plain across
// origins without a preflight; the server takes application/json only.
func TestServerTakesJSONOnly(t *testing.T) {
	srv := codecServer(t, mustKeys(t, "k1:"+newKey(t)), testToken, nil, true)
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonp", "application/json; charset"} {
		resp, body := post(t, srv.URL+"/decode", nil, map[string]string{"Content-Type": ct, "Origin": uiOrigin})
		require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "%q: %s", ct, body)
	}
}

func TestServerSignIn(t *testing.T) {
	get := func(srv *httptest.Server, auth string) (*http.Response, string) {
		return send(t, http.MethodGet, srv.URL+"/", nil, map[string]string{"Authorization": auth})
	}
	srv := codecServer(t, mustKeys(t, "k1:"+newKey(t)), testToken, nil, false)
	resp, _ := get(srv, "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, resp.Header.Values("WWW-Authenticate"), `Basic realm="codec", charset="UTF-8"`, "a browser asks its user")
	resp, _ = get(srv, basic("analyst", "wrong"))
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, body := get(srv, basic("analyst", testToken))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "Signed in")

	resp, _ = get(codecServer(t, mustKeys(t, "k1:"+newKey(t)), "", nil, true), "")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestServerTimeouts(t *testing.T) {
	srv := NewServer(ServerOptions{Codec: NewCodec(mustKeys(t, "k1:"+newKey(t))), Token: testToken})
	require.Equal(t, readHeaderTimeout, srv.ReadHeaderTimeout)
	require.Equal(t, readTimeout, srv.ReadTimeout)
	require.Equal(t, writeTimeout, srv.WriteTimeout)
	require.Equal(t, idleTimeout, srv.IdleTimeout)
	require.Equal(t, maxHeaderBytes, srv.MaxHeaderBytes)
	for _, d := range []time.Duration{srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout} {
		require.Positive(t, d)
	}

	// A client that never finishes its request is cut off: the same server
	// with a short header timeout, so the test does not wait ten seconds.
	srv.ReadHeaderTimeout, srv.ReadTimeout = 200*time.Millisecond, 200*time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	for name, partial := range map[string]string{
		"headers never end": "POST /decode HTTP/1.1\r\nHost: codec\r\nContent-Type: application/json\r\n",
		"body never comes":  "POST /decode HTTP/1.1\r\nHost: codec\r\nContent-Type: application/json\r\nAuthorization: Bearer " + testToken + "\r\nContent-Length: 100\r\n\r\n{",
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("tcp", ln.Addr().String())
			require.NoError(t, err)
			defer conn.Close()
			_, err = conn.Write([]byte(partial))
			require.NoError(t, err)
			// The deadline only bounds a server that never hangs up.
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
			_, err = io.ReadAll(conn)
			var ne net.Error
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server kept the connection open")
		})
	}
}

// TestServerRefusesOtherNamespaces: a server for namespace default decrypts
// nothing bound to prod (same key file), whatever path it is asked on, and
// binds what it encrypts to default.
func TestServerRefusesOtherNamespaces(t *testing.T) {
	keys := mustKeys(t, "k1:"+newKey(t))
	prod := NewCodec(keys).WithSerializationContext(converter.WorkflowSerializationContext{Namespace: "prod", WorkflowID: "investigation-x"})
	enc, err := prod.Encode([]*commonpb.Payload{jsonPayload(t, secret)})
	require.NoError(t, err)
	srv := codecServer(t, keys, testToken, nil, true)
	auth := map[string]string{"Authorization": "Bearer " + testToken}
	for _, path := range []string{"/default/decode", "/decode"} {
		resp, body := post(t, srv.URL+path, enc, auth)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", path, body)
		require.NotContains(t, body, "198.51.100.23")
		require.Contains(t, body, `bound to "workflow:prod/investigation-x"`)
	}
	resp, body := post(t, srv.URL+"/encode", []*commonpb.Payload{jsonPayload(t, secret)}, auth)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "namespace:default", string(unmarshal(t, body)[0].Metadata[MetadataBoundTo]))
}
