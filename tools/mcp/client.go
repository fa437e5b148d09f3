package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/redact"
	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/tools"
)

// The states of a server, as starter tools shows them.
const (
	StateConnecting = "connecting"
	StateConnected  = "connected"
	StateFailed     = "failed"
)

// connectTimeout bounds connecting to a server and listing its tools.
const connectTimeout = 30 * time.Second

// RetryEvery is how often a failed or lost server is connected again.
var RetryEvery = 15 * time.Second

// Servers are the worker's MCP servers: their connections, their state and
// their tools, which it keeps in the registry's group "mcp:<server>".
type Servers struct {
	reg   *tools.Registry
	log   *slog.Logger
	conns []*conn
	// Stderr receives the stdio servers' error output (the worker's).
	Stderr io.Writer
}

// maxRecordedTools bounds the declarations of every server's offered tools
// together, as JSON. A plan records them whole (PlanOutput.Tools), and so
// do the investigation's state, its continue-as-new input and each direct
// answer's turn input: Temporal warns about a payload over 512 KiB and
// refuses one over 2 MiB, and the state holds more than tools. The limits
// per server (64 tools, 8 KiB schemas) allow 16 servers about 10 MiB.
const maxRecordedTools = 256 << 10

// admit keeps of a connecting server's tools, in the order it lists them,
// those that fit in its share of maxRecordedTools: an equal share for each
// configured server, whether the others connected, failed or are slow.
// Which tools a server offers so depends on its own list and the
// configuration only, never on timing: identically configured workers
// offer the same tools (the worker fingerprint leaves tool lists out), and
// a plan made on one runs on another. The rest are skipped, saying so.
func (s *Servers) admit(ts []tools.Tool) ([]tools.Tool, []tools.Disabled) {
	share := maxRecordedTools / max(1, len(s.conns))
	used, kept := 0, 0
	for kept < len(ts) && used+ts[kept].(*Tool).size <= share {
		used += ts[kept].(*Tool).size
		kept++
	}
	var skipped []tools.Disabled
	for _, t := range ts[kept:] {
		skipped = append(skipped, tools.Disabled{Name: t.Declaration().Name, Reason: fmt.Sprintf(
			"left out for the cap: a plan records at most %d KiB of MCP tool declarations, %d KiB for each of the %d servers configured; %d of this server's %d tools are left out (name the ones to offer in tools:)",
			maxRecordedTools>>10, share>>10, max(1, len(s.conns)), len(ts)-kept, len(ts))})
	}
	return ts[:kept], skipped
}

// conn is one server's connection.
type conn struct {
	name    string
	cfg     Server
	servers *Servers
	limiter *rate.Limiter
	// secrets are the values of its headers and env variables (and of its
	// URL's query) at least minCredential bytes long: a server or proxy may
	// quote them in an error, which reaches the model, the tool catalog,
	// the log and Temporal history; and a tool named with one is not
	// offered.
	secrets *redact.Redactor

	// mu guards the fields below and is never held across the network (a
	// dial, a close, a ping): Statuses and the calls read them at once.
	mu      sync.Mutex
	sess    *mcp.ClientSession
	abort   context.CancelFunc // ends every HTTP request of sess still open
	state   string
	err     string
	tools   int
	skipped int
	// dialing is closed when the connect under way ends (nil: none is).
	dialing chan struct{}
	// closed: Close ran; a dial that ends later is closed, not kept.
	closed bool
	// timeouts counts the session's calls in a row that got no answer in
	// time; pinging says a ping checks the session after one.
	timeouts int
	pinging  bool
}

// New prepares the configured servers; Connect connects them.
func New(cfg *Config, reg *tools.Registry, log *slog.Logger) *Servers {
	s := &Servers{reg: reg, log: log, Stderr: os.Stderr}
	for _, n := range cfg.Names() {
		sc := cfg.Servers[n]
		sc.dir = cfg.Dir
		lim := rate.NewLimiter(rate.Inf, 1)
		if sc.Rate > 0 {
			lim = rate.NewLimiter(rate.Limit(sc.Rate), 1)
		}
		c := &conn{name: n, cfg: sc, servers: s, limiter: lim, state: StateConnecting}
		c.secrets = secretsOf(sc)
		s.conns = append(s.conns, c)
	}
	return s
}

// secretsOf is a redactor of the values a server's configuration takes from
// the environment: each whole, and a header's credential without its scheme
// ("Bearer ", "Basic "), which a server may quote alone; and of its URL's
// query. A value shorter
// than minCredential is no credential (a region, a tenant number) and is
// left alone: redacted, "1" or "eu" would rewrite every IP address and word
// the model reads, case-insensitively.
func secretsOf(sc Server) *redact.Redactor {
	var secrets []string
	add := func(v string) {
		if len(v) >= minCredential {
			secrets = append(secrets, v)
		}
	}
	for _, m := range []map[string]string{sc.Headers, sc.Env} {
		for _, v := range m {
			val, ok := os.LookupEnv(v)
			if !ok {
				continue
			}
			add(val)
			if _, cred, ok := strings.Cut(strings.TrimSpace(val), " "); ok {
				add(strings.TrimSpace(cred))
			}
		}
	}
	// A query may carry a key (?api_key=...), and errors quote the URL:
	// its values, and the query whole, are redacted like a header's.
	if u, err := url.Parse(sc.URL); err == nil && u.RawQuery != "" {
		add(u.RawQuery)
		for _, vs := range u.Query() {
			for _, v := range vs {
				add(v)
			}
		}
	}
	return redact.New(secrets...)
}

// minCredential is the length from which a configured value is taken for a
// credential: redacted wherever the server's text goes, and refused in a
// tool's name.
const minCredential = 8

// Connect connects every server at once and lists its tools; a server that
// fails is recorded as failed, with why, and retried by Watch. It returns
// once each server connected or failed.
func (s *Servers) Connect(ctx context.Context) {
	var wg sync.WaitGroup
	for _, c := range s.conns {
		wg.Go(func() { _, _ = c.connect(ctx) })
	}
	wg.Wait()
}

// Watch reconnects failed and lost servers every RetryEvery until ctx ends;
// a reconnect lists the tools again.
func (s *Servers) Watch(ctx context.Context) {
	t := time.NewTicker(RetryEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var wg sync.WaitGroup
		for _, c := range s.conns {
			c.mu.Lock()
			down := c.sess == nil && c.dialing == nil && !c.closed
			c.mu.Unlock()
			if down { // at once: one slow server does not hold the others back
				wg.Go(func() { _, _ = c.connect(ctx) })
			}
		}
		wg.Wait()
	}
}

// Close closes every session (a stdio server's process ends with it).
func (s *Servers) Close() {
	var wg sync.WaitGroup
	for _, c := range s.conns {
		c.mu.Lock()
		sess, abort := c.sess, c.abort
		c.sess, c.abort, c.closed = nil, nil, true
		c.mu.Unlock()
		if sess != nil {
			wg.Go(func() { _ = sess.Close(); abort() })
		}
	}
	wg.Wait()
}

// Statuses describe each server for starter tools.
func (s *Servers) Statuses() []investigation.MCPServer {
	out := make([]investigation.MCPServer, 0, len(s.conns))
	for _, c := range s.conns {
		c.mu.Lock()
		out = append(out, investigation.MCPServer{Name: c.name, Transport: c.cfg.Transport(), State: c.state, Error: c.err, Tools: c.tools, Skipped: c.skipped})
		c.mu.Unlock()
	}
	return out
}

// Configured says whether this worker has the named server configured.
func (s *Servers) Configured(name string) bool {
	for _, c := range s.conns {
		if c.name == name {
			return true
		}
	}
	return false
}

// lost drops a session whose transport failed, so the next call connects
// again. The session closes in the background: a stdio server is given
// seconds to exit, which neither the caller nor Statuses waits for.
func (c *conn) lost(sess *mcp.ClientSession, err error) {
	c.mu.Lock()
	mine, abort := c.sess == sess, c.abort
	if mine {
		c.sess, c.abort, c.state, c.err = nil, nil, StateFailed, "lost: "+clip.String(c.secrets.String(err.Error()), 300)
		// Its tools stay in the registry until it reconnects or fails.
	}
	c.mu.Unlock()
	if mine {
		abort() // what is still open waits on a session given up
		go func() { _ = sess.Close() }()
	}
}

// connect returns the live session, or connects: one dial at a time per
// server, which every caller waits for as long as its own ctx allows, with
// no lock held meanwhile. The dial does not end with the caller that
// started it: another investigation's stop would otherwise fail the
// server for everyone.
func (c *conn) connect(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	if c.sess != nil {
		sess := c.sess
		c.mu.Unlock()
		return sess, nil
	}
	if c.closed {
		c.mu.Unlock()
		return nil, fmt.Errorf("MCP server %s is not connected: the worker is stopping", c.name)
	}
	wait := c.dialing
	if wait == nil {
		wait = make(chan struct{})
		c.dialing, c.state = wait, StateConnecting
		go c.redial(context.WithoutCancel(ctx), wait)
	}
	c.mu.Unlock()
	select {
	case <-wait:
	case <-ctx.Done():
		return nil, fmt.Errorf("MCP server %s: waiting for it to connect: %w", c.name, ctx.Err())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return nil, fmt.Errorf("MCP server %s is not connected: %s", c.name, c.err)
	}
	return c.sess, nil
}

// redial dials, lists the tools and puts them in the registry; on failure
// the server's tools leave the registry and its state says why. It closes
// done when the outcome is recorded.
func (c *conn) redial(ctx context.Context, done chan struct{}) {
	reqs, abort := context.WithCancel(context.Background())
	sess, ts, skipped, err := c.dial(ctx, reqs)
	err = c.secrets.Error(err)

	c.mu.Lock()
	defer func() {
		c.dialing = nil
		close(done)
		c.mu.Unlock()
	}()
	group := "mcp:" + c.name
	switch {
	case err == nil && c.closed:
		go func() { _ = sess.Close(); abort() }()
		c.state, c.err = StateFailed, "the worker is stopping"
		return
	case err != nil:
		abort()
		c.state, c.err = StateFailed, clip.String(err.Error(), 300)
		c.servers.reg.SetGroup(group, nil, []tools.Disabled{{Name: c.name + ".*", Reason: "MCP server " + c.name + " is not connected: " + c.err}})
		c.servers.log.Warn("MCP server not connected", "server", c.name, "error", c.err)
		return
	}
	ts, over := c.servers.admit(ts)
	skipped = append(skipped, over...)
	c.sess, c.abort, c.state, c.err, c.tools, c.skipped, c.timeouts = sess, abort, StateConnected, "", len(ts), len(skipped), 0
	c.servers.reg.SetGroup(group, ts, skipped)
	c.servers.log.Info("MCP server connected", "server", c.name, "transport", c.cfg.Transport(), "tools", len(ts), "skipped", len(skipped))
	go func() {
		// A stdio server that exits, or an HTTP session that ends, is
		// lost: Watch or the next call connects again.
		err := sess.Wait()
		c.lost(sess, cmpErr(err, errors.New("the server closed the session")))
	}()
}

// The checks of a session that stops answering. An idle one is pinged every
// keepAlive (the SDK closes it after two pings in a row go unanswered, each
// given half the interval); after a call times out it is pinged at once,
// for up to pingTimeout (at most the server's call timeout), and dropped if
// the ping goes unanswered; and it is dropped after maxTimeouts calls in a
// row time out, answered pings or not (a stdio server whose tools are
// stuck gets a new process). Dropped, Watch or the next call connects
// again; without this a hung server stays "connected" and every call
// waits its whole timeout.
const (
	keepAlive   = 30 * time.Second
	pingTimeout = 10 * time.Second
	maxTimeouts = 3
)

// answered records how a call on sess ended: any answer (a result or a
// JSON-RPC error) clears the count of timeouts, a timeout adds to it.
func (c *conn) answered(sess *mcp.ClientSession, ok, timedOut bool) {
	c.mu.Lock()
	if c.sess != sess {
		c.mu.Unlock()
		return
	}
	switch {
	case ok:
		c.timeouts = 0
	case timedOut:
		c.timeouts++
	}
	n, ping := c.timeouts, timedOut && !c.pinging && c.timeouts < maxTimeouts
	if ping {
		c.pinging = true
	}
	c.mu.Unlock()
	if timedOut && n >= maxTimeouts {
		c.lost(sess, fmt.Errorf("%d calls in a row got no answer within %s", n, c.cfg.timeout()))
		return
	}
	if ping {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), min(pingTimeout, c.cfg.timeout()))
			defer cancel()
			err := sess.Ping(ctx, nil)
			c.mu.Lock()
			c.pinging = false
			c.mu.Unlock()
			var rpc *jsonrpc.Error
			if err != nil && !errors.As(err, &rpc) { // an error answer is an answer
				c.lost(sess, fmt.Errorf("a call got no answer within %s, nor a ping after it: %w", c.cfg.timeout(), err))
			}
		}()
	}
}

func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// dial opens a session and lists the tools, keeping those allowed and
// usable and saying why each other one is skipped.
func (c *conn) dial(ctx context.Context, abort context.Context) (*mcp.ClientSession, []tools.Tool, []tools.Disabled, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	transport, err := c.transport(abort)
	if err != nil {
		return nil, nil, nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "investigator", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		KeepAlive:    keepAlive, KeepAliveFailureThreshold: 2,
	})
	sess, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connect: %w", err)
	}
	var ts []tools.Tool
	var skipped []tools.Disabled
	listed, considered := 0, 0
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			_ = sess.Close()
			return nil, nil, nil, fmt.Errorf("list tools: %w", err)
		}
		if listed++; listed > maxListed {
			break // a server listing without end
		}
		if len(c.cfg.Tools) > 0 && !contains(c.cfg.Tools, t.Name) {
			continue // not counted below: an allowed tool may come late in a long list
		}
		if considered++; considered > 4*maxToolsPerServer {
			break
		}
		display := c.name + "." + clip.String(strconv.QuoteToASCII(c.secrets.String(t.Name)), 80) // a skipped name, escaped for display
		if len(ts) >= maxToolsPerServer {
			skipped = append(skipped, tools.Disabled{Name: display, Reason: fmt.Sprintf("the server lists more than %d tools; name the ones to offer in tools:", maxToolsPerServer)})
			continue
		}
		tool, err := newTool(c, t)
		if err != nil {
			skipped = append(skipped, tools.Disabled{Name: display, Reason: "skipped: " + err.Error()})
			continue
		}
		ts = append(ts, tool)
	}
	for _, want := range c.cfg.Tools {
		found := false
		for _, t := range ts {
			found = found || t.(*Tool).remote == want
		}
		for _, d := range skipped {
			found = found || d.Name == c.name+"."+strconv.QuoteToASCII(want)
		}
		if !found {
			skipped = append(skipped, tools.Disabled{Name: c.name + "." + want, Reason: "the configuration allows it but the server does not list it"})
		}
	}
	return sess, ts, skipped, nil
}

// maxListed bounds the tools read from one server's list, allowed or not.
const maxListed = 64 * maxToolsPerServer

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// transport builds the server's transport. A stdio server gets a small
// environment (PATH, HOME, locale, temp dir) plus the variables its
// configuration names, never the worker's whole environment with its keys.
// An HTTP server's requests also end when abort does (the session was
// dropped): its abandoned calls' cancellation notices and the session's
// DELETE are not left waiting on a server that stopped answering.
func (c *conn) transport(abort context.Context) (mcp.Transport, error) {
	if c.cfg.URL != "" {
		headers := http.Header{}
		for h, v := range c.cfg.Headers {
			val, ok := os.LookupEnv(v)
			if !ok {
				return nil, fmt.Errorf("header %s needs the variable %s, which is not set", h, v)
			}
			headers.Set(h, val)
		}
		endpoint, err := url.Parse(c.cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("url: %w", err)
		}
		return &mcp.StreamableClientTransport{
			Endpoint: c.cfg.URL,
			HTTPClient: &http.Client{
				Transport:     headerTransport{headers, origin(endpoint), limitTransport{abortTransport{abort, http.DefaultTransport}}},
				CheckRedirect: sameOrigin,
			},
			MaxRetries:   2,
			MaxEventSize: maxResponseBytes, // a streamed answer: one event at a time
		}, nil
	}
	command := c.cfg.Command
	if c.cfg.dir != "" && strings.Contains(command, "/") && !filepath.IsAbs(command) {
		command = filepath.Join(c.cfg.dir, command)
	}
	cmd := exec.Command(command, c.cfg.Args...)
	cmd.Dir = c.cfg.dir
	for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR", "USER"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for k, v := range c.cfg.Env {
		val, ok := os.LookupEnv(v)
		if !ok {
			return nil, fmt.Errorf("env %s needs the variable %s, which is not set", k, v)
		}
		cmd.Env = append(cmd.Env, k+"="+val)
	}
	cmd.Stderr = newStderrLines(c.name, c.servers.Stderr, c.secrets)
	// A child of the server that keeps its stderr open does not hold the
	// session's close for ever.
	cmd.WaitDelay = terminateAfter
	return &commandTransport{cmd: cmd}, nil
}

// abortTransport ends each request, and the reading of its answer, when ctx
// ends, whatever the request's own context.
type abortTransport struct {
	ctx  context.Context
	base http.RoundTripper
}

func (t abortTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(t.ctx, cancel)
	end := func() { stop(); cancel() }
	resp, err := t.base.RoundTrip(r.WithContext(ctx))
	if err != nil || resp.Body == nil {
		end()
		return resp, err
	}
	resp.Body = &endingBody{ReadCloser: resp.Body, end: end}
	return resp, nil
}

// endingBody releases its request's context once closed.
type endingBody struct {
	io.ReadCloser
	end func()
}

func (b *endingBody) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}

// headerTransport adds the configured headers to every request to the
// server's origin, and to no other: they usually hold a credential.
type headerTransport struct {
	h      http.Header
	origin string // of the configured URL
	base   http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if origin(r.URL) != t.origin {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}

// maxRedirects is Go's default limit, kept for same-origin redirects.
const maxRedirects = 10

// sameOrigin follows a redirect only to the scheme, host and port of the
// first request. Go copies custom headers (an API key header) to every
// redirect, even to another host, so a server or proxy that redirects would
// otherwise receive the credential wherever it points.
func sameOrigin(req *http.Request, via []*http.Request) error {
	from, to := origin(via[0].URL), origin(req.URL)
	switch {
	case from != to:
		return fmt.Errorf("the server redirected to another origin (%s), which is not followed so that its headers are not sent there", to)
	case len(via) >= maxRedirects:
		return fmt.Errorf("the server redirected %d times", len(via))
	}
	return nil
}

// origin is scheme://host[:port], lower-cased.
func origin(u *url.URL) string { return strings.ToLower(u.Scheme + "://" + u.Host) }

// maxResponseBytes bounds one answer of a server: over HTTP, the SDK reads a
// JSON answer whole (io.ReadAll), and an event of a streamed one up to its
// MaxEventSize, which is set to the same; over stdio, one line
// (commandTransport).
const maxResponseBytes = 8 << 20

// errTooLarge is what reading past maxResponseBytes gives (see tooLarge).
var errTooLarge = fmt.Errorf("the server answered with more than %d MiB", maxResponseBytes>>20)

// tooLarge says whether err is an answer over maxResponseBytes: the SDK
// passes both ours and its own (an event over MaxEventSize) on as text only.
// TestOversizedAnswersAreRefused checks both sentences.
func tooLarge(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, errTooLarge.Error()) || strings.Contains(msg, "SSE event exceeded") ||
		strings.Contains(msg, "inbound JSON-RPC frame exceeded") // a stdio line over IOTransport.MaxLineLength
}

// limitTransport bounds each response body other than a successful event
// stream (a long-lived stream is bounded per event instead, by
// MaxEventSize); the SDK reads an error answer whole, whatever its type.
type limitTransport struct{ base http.RoundTripper }

func (t limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "text/event-stream" || resp.StatusCode < 200 || resp.StatusCode > 299 {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxResponseBytes}
	}
	return resp, nil
}

// limitedBody fails with errTooLarge once more than left bytes were read, so
// that an oversized answer is an error, never a silently cut one.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, errTooLarge
	}
	return n, err
}
