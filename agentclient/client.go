// Package agentclient is the analyst's client of the Investigation workflow:
// it connects to Temporal (TLS, API key, the payload codec), starts
// investigations with their search attributes, sends the steering updates,
// reads status, results and run trees, and follows an investigation's
// progress events in order, each once, across continue-as-new and child
// runs, rendering them as text or JSON lines. The starter's commands are
// thin cobra wrappers around it; the worker dials through it too.
package agentclient

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"google.golang.org/grpc/codes"

	"github.com/secops-agent/investigator/config"
	"github.com/secops-agent/investigator/internal/pricing"
	"github.com/secops-agent/investigator/payloadcodec"
	"github.com/secops-agent/investigator/telemetry"
)

// DefaultCallTimeout bounds each call to Temporal that has no deadline of
// its own when Options.CallTimeout is zero.
const DefaultCallTimeout = 30 * time.Second

// Options configure a Client.
type Options struct {
	Temporal config.Temporal
	// CallTimeout bounds each call to Temporal, and how long a follower
	// waits for an unreachable Temporal; zero means DefaultCallTimeout.
	CallTimeout time.Duration
	// Logger receives the Temporal client's logs; nil discards them.
	Logger *slog.Logger
	// Prices price the model calls a status shows; zero means
	// pricing.Default().
	Prices pricing.Table
	// Telemetry, when not nil, traces the client's calls (and propagates
	// the trace into the workflows it starts) and exports its metrics.
	Telemetry *telemetry.Telemetry
	// Progress, when set, is the store investigations keep their progress
	// in: followers wait on it and status reads it when no worker answers.
	Progress ProgressStore
	// ProgressUnreachable is the sentence for a progress store that did
	// not answer within the call timeout (naming where it is); nil says
	// "the progress store".
	ProgressUnreachable func() string
	// OnClose is called by Close (the progress store's connection).
	OnClose func()
}

// Client is a connection to Temporal with the settings of one namespace
// and task queue.
type Client struct {
	tc      client.Client
	src     stream
	dc      converter.DataConverter
	cfg     config.Temporal
	timeout time.Duration
	prices  pricing.Table
	// progress is Options.Progress (nil: follow through Temporal only).
	progress ProgressStore
	// progressDown is Options.ProgressUnreachable.
	progressDown func() string
	onClose      func()
	// attrs is the namespace's search attributes once listed (start.go).
	attrsMu sync.Mutex
	attrs   *attributeList
}

// Dial connects to Temporal with the options' settings.
func Dial(o Options) (*Client, error) {
	keys, err := PayloadKeys(o.Temporal)
	if err != nil {
		return nil, err
	}
	tc, err := dial(o.Temporal, keys, o.Logger, o.Telemetry)
	if err != nil {
		return nil, err
	}
	return wrap(tc, keys, o), nil
}

// New wraps an SDK client that is already connected (tests give a fake);
// the payload key file of the options still decodes what the client reads
// from history.
func New(tc client.Client, o Options) (*Client, error) {
	keys, err := PayloadKeys(o.Temporal)
	if err != nil {
		return nil, err
	}
	return wrap(tc, keys, o), nil
}

func wrap(tc client.Client, keys *payloadcodec.Keys, o Options) *Client {
	timeout := o.CallTimeout
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	prices := o.Prices
	if len(prices.Models) == 0 {
		prices = pricing.Default()
	}
	dc := payloadcodec.NewDataConverter(keys, nil)
	return &Client{tc: tc, src: temporalStream{tc, dc}, dc: dc, cfg: o.Temporal, timeout: timeout, prices: prices,
		progress: o.Progress, progressDown: o.ProgressUnreachable, onClose: o.OnClose}
}

// Close closes the connection.
func (c *Client) Close() {
	c.tc.Close()
	if c.onClose != nil {
		c.onClose()
	}
}

// WorkflowURL is the Web UI link of a workflow.
func (c *Client) WorkflowURL(id string) string { return c.cfg.WorkflowURL(id) }

// DialTemporal returns the SDK client the worker runs on: the same
// connection settings, converters and key handling as the analyst's client.
// A worker made from it inherits tel's interceptors and metrics handler.
func DialTemporal(t config.Temporal, logger *slog.Logger, tel *telemetry.Telemetry) (client.Client, error) {
	keys, err := PayloadKeys(t)
	if err != nil {
		return nil, err
	}
	return dial(t, keys, logger, tel)
}

// PayloadKeys loads the payload key file, or returns nil without one.
func PayloadKeys(t config.Temporal) (*payloadcodec.Keys, error) {
	if t.PayloadKeyFile == "" {
		return nil, nil
	}
	return payloadcodec.LoadKeyFile(t.PayloadKeyFile)
}

// dial connects to Temporal, logging through slog. The API key is read from
// TEMPORAL_API_KEY only, never from a flag.
func dial(t config.Temporal, keys *payloadcodec.Keys, logger *slog.Logger, tel *telemetry.Telemetry) (client.Client, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	opts := client.Options{
		HostPort:  t.Address,
		Namespace: t.Namespace,
		Logger:    tlog.NewStructuredLogger(logger),
	}
	if w := keys.Warning(); w != "" {
		logger.Warn(w)
	}
	opts.DataConverter, opts.FailureConverter = Converters(keys, logger)
	tel.Client(&opts)
	if key := config.Env("", "TEMPORAL_API_KEY"); key != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(key)
		t.TLS = true
	}
	if (t.CertPath == "") != (t.KeyPath == "") {
		return nil, fmt.Errorf("mTLS needs both TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH")
	}
	if t.CertPath != "" {
		cert, err := tls.LoadX509KeyPair(t.CertPath, t.KeyPath)
		if err != nil {
			return nil, fmt.Errorf("load the Temporal client certificate: %w", err)
		}
		opts.ConnectionOptions.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	} else if t.TLS {
		opts.ConnectionOptions.TLS = &tls.Config{}
	}
	c, err := client.Dial(opts)
	if err != nil {
		return nil, dialError(t, err, opts.ConnectionOptions.TLS, logger)
	}
	return c, nil
}

// dialError is one sentence for a failed dial. The gRPC text (resolver,
// transport, "no children to pick from") tells a user nothing they can act
// on; it goes to the debug log. Unavailable also covers a TLS handshake
// that failed (tlsCfg, when TLS is on), which is said as such.
func dialError(t config.Temporal, err error, tlsCfg *tls.Config, logger *slog.Logger) error {
	logger.Debug("Temporal dial failed", "address", t.Address, "error", err)
	where := fmt.Sprintf("cannot connect to Temporal at %s (namespace %s)", t.Address, t.Namespace)
	// The SDK wraps the gRPC status as a serviceerror; ToStatus unwraps it.
	switch serviceerror.ToStatus(err).Code() {
	case codes.Unavailable, codes.DeadlineExceeded:
		hasCert := t.CertPath != ""
		why := tlsProblem(err, hasCert)
		if why == "" && tlsCfg != nil {
			why = tlsProblem(probeTLS(t.Address, tlsCfg, logger), hasCert)
		}
		if why != "" {
			return &UnavailableError{where + ": " + why}
		}
		return &UnavailableError{where + ": nothing answered; is the server running?"}
	case codes.Unauthenticated, codes.PermissionDenied:
		return fmt.Errorf("%s: the server refused the credentials (TEMPORAL_API_KEY or the client certificate)", where)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// tlsProbeTimeout bounds the TLS handshake probeTLS tries after a failed dial.
const tlsProbeTimeout = 5 * time.Second

// probeTLS makes one TLS handshake with the dial's settings to learn why
// TLS failed: gRPC hands the handshake's error on as text only (a status),
// so its type is lost by the time the dial fails. nil when it succeeds or
// no connection was made (then TLS is not the problem).
func probeTLS(address string, cfg *tls.Config, logger *slog.Logger) error {
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		// As gRPC does: the host the certificate must name.
		if host, _, err := net.SplitHostPort(address); err == nil {
			cfg.ServerName = host
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), tlsProbeTimeout)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", address)
	if err == nil {
		// Under TLS 1.3 the client's handshake ends before the server
		// checks the client's certificate: its refusal (an alert) is what
		// the first read gets. A server that took it sends data or nothing.
		_ = conn.SetReadDeadline(time.Now().Add(tlsAlertWait))
		if _, rerr := conn.Read(make([]byte, 1)); certAlert(rerr) != "" {
			err = rerr
		}
		conn.Close()
	}
	if err != nil {
		logger.Debug("Temporal TLS probe failed", "address", address, "error", err)
	}
	return err
}

// tlsAlertWait bounds how long probeTLS waits for the server's alert.
const tlsAlertWait = time.Second

// remoteAlert finds the TLS alert a peer sent in a gRPC status text, which
// keeps the handshake's error as text only ("... remote error: tls: bad
// certificate").
var remoteAlert = regexp.MustCompile(`remote error: tls: ([a-z ]+)`)

// certAlerts are the TLS alerts (as crypto/tls names them) a server sends
// when it refuses the client's certificate, or got none it accepts. The
// client checks the server's certificate itself, so a server's alert of
// these is always about the client's.
var certAlerts = []string{"bad certificate", "unsupported certificate", "revoked certificate", "expired certificate",
	"unknown certificate", "unknown certificate authority", "certificate required", "access denied"}

// certAlert is the certificate alert the server sent, from err's types or
// its text, or "".
func certAlert(err error) string {
	if err == nil {
		return ""
	}
	var op *net.OpError
	alert := ""
	if errors.As(err, &op) && op.Op == "remote error" && op.Err != nil {
		alert = strings.TrimPrefix(op.Err.Error(), "tls: ")
	} else if m := remoteAlert.FindStringSubmatch(err.Error()); m != nil {
		alert = strings.TrimSpace(m[1])
	}
	if slices.Contains(certAlerts, alert) {
		return alert
	}
	return ""
}

// tlsProblem says why TLS failed (tlsFailure), or that the server refused
// the client's certificate (certRefused); "" when err is neither.
func tlsProblem(err error, hasCert bool) string {
	return cmp.Or(tlsFailure(err), certRefused(err, hasCert))
}

// certRefused says the server refused the client's certificate (mTLS), or
// "" when err is no such refusal. hasCert says one was configured.
func certRefused(err error, hasCert bool) string {
	alert := certAlert(err)
	switch {
	case alert == "":
		return ""
	case !hasCert:
		return "the Temporal server requires a client certificate (mTLS) and none was given: set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH"
	}
	return "the Temporal server refused this client's certificate (tls: " + alert + "): check TEMPORAL_TLS_CLIENT_CERT_PATH and that the server trusts its issuer"
}

// tlsFailure says why a TLS handshake failed, from the error's types, or
// "" when err is no TLS failure.
func tlsFailure(err error) string {
	var (
		record    tls.RecordHeaderError
		verify    *tls.CertificateVerificationError
		authority x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &record):
		return "TLS failed: the server does not speak TLS (TLS is on because of --temporal-tls, TEMPORAL_TLS, TEMPORAL_API_KEY or a client certificate; a local dev server has no TLS)"
	case errors.As(err, &verify), errors.As(err, &authority), errors.As(err, &hostname), errors.As(err, &invalid):
		return "TLS failed: the server's certificate is not trusted (an unknown authority, another host name, or expired)"
	}
	return ""
}

// Converters are the client's data and failure converters for a key ring.
// Without keys (nil) payloads stay in clear and the codec only turns an
// encrypted payload into a clear error; with keys every payload is encrypted,
// and so are failure messages and stack traces (EncodeCommonAttributes),
// except the one sentence saying a payload cannot be decrypted, which is
// logged (once a minute) through logger when it is not nil.
func Converters(keys *payloadcodec.Keys, logger *slog.Logger) (converter.DataConverter, converter.FailureConverter) {
	dc := payloadcodec.NewDataConverter(keys, logger)
	return dc, payloadcodec.NewFailureConverter(dc, keys != nil)
}
