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

	mu      sync.Mutex
	sess    *mcp.ClientSession
	state   string
	err     string
	tools   int
	skipped int
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
		for _, c := range s.conns {
			c.mu.Lock()
			down := c.sess == nil
			c.mu.Unlock()
			if down {
				_, _ = c.connect(ctx)
			}
		}
	}
}

// Close closes every session (a stdio server's process ends with it).
func (s *Servers) Close() {
	for _, c := range s.conns {
		c.mu.Lock()
		if c.sess != nil {
			_ = c.sess.Close()
			c.sess = nil
		}
		c.mu.Unlock()
	}
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

// session returns the live session, connecting again if it was lost.
func (c *conn) session(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	sess := c.sess
	c.mu.Unlock()
	if sess != nil {
		return sess, nil
	}
	return c.connect(ctx)
}

// lost drops a session whose transport failed, so the next call connects
// again.
func (c *conn) lost(sess *mcp.ClientSession, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == sess {
		c.sess, c.state, c.err = nil, StateFailed, "lost: "+clip.String(c.secrets.String(err.Error()), 300)
		_ = sess.Close()
		// Its tools stay in the registry until it reconnects or fails.
	}
}

// connect connects, lists the tools and puts them in the registry; on
// failure the server's tools leave the registry and its state says why.
func (c *conn) connect(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != nil {
		return c.sess, nil
	}
	sess, ts, skipped, err := c.dial(ctx)
	err = c.secrets.Error(err)
	group := "mcp:" + c.name
	if err != nil {
		c.state, c.err = StateFailed, clip.String(err.Error(), 300)
		c.servers.reg.SetGroup(group, nil, []tools.Disabled{{Name: c.name + ".*", Reason: "MCP server " + c.name + " is not connected: " + c.err}})
		c.servers.log.Warn("MCP server not connected", "server", c.name, "error", c.err)
		return nil, fmt.Errorf("MCP server %s is not connected: %w", c.name, err)
	}
	ts, over := c.servers.admit(ts)
	skipped = append(skipped, over...)
	c.sess, c.state, c.err, c.tools, c.skipped = sess, StateConnected, "", len(ts), len(skipped)
	c.servers.reg.SetGroup(group, ts, skipped)
	c.servers.log.Info("MCP server connected", "server", c.name, "transport", c.cfg.Transport(), "tools", len(ts), "skipped", len(skipped))
	go func() {
		// A stdio server that exits, or an HTTP session that ends, is
		// lost: Watch or the next call connects again.
		err := sess.Wait()
		c.lost(sess, cmpErr(err, errors.New("the server closed the session")))
	}()
	return sess, nil
}

func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// dial opens a session and lists the tools, keeping those allowed and
// usable and saying why each other one is skipped.
func (c *conn) dial(ctx context.Context) (*mcp.ClientSession, []tools.Tool, []tools.Disabled, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	transport, err := c.transport()
	if err != nil {
		return nil, nil, nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "investigator", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	sess, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connect: %w", err)
	}
	var ts []tools.Tool
	var skipped []tools.Disabled
	listed := 0
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			_ = sess.Close()
			return nil, nil, nil, fmt.Errorf("list tools: %w", err)
		}
		listed++
		if listed > 4*maxToolsPerServer {
			break // a server listing without end
		}
		if len(c.cfg.Tools) > 0 && !contains(c.cfg.Tools, t.Name) {
			continue
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
func (c *conn) transport() (mcp.Transport, error) {
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
				Transport:     headerTransport{headers, origin(endpoint), limitTransport{http.DefaultTransport}},
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
	cmd.Stderr = c.servers.Stderr
	return &mcp.CommandTransport{Command: cmd}, nil
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

// maxResponseBytes bounds one answer of an HTTP server: the SDK reads a JSON
// answer whole (io.ReadAll), and an event of a streamed one up to its
// MaxEventSize, which is set to the same.
const maxResponseBytes = 8 << 20

// errTooLarge is what reading past maxResponseBytes gives (see tooLarge).
var errTooLarge = fmt.Errorf("the server answered with more than %d MiB", maxResponseBytes>>20)

// tooLarge says whether err is an answer over maxResponseBytes: the SDK
// passes both ours and its own (an event over MaxEventSize) on as text only.
// TestOversizedAnswersAreRefused checks both sentences.
func tooLarge(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, errTooLarge.Error()) || strings.Contains(msg, "SSE event exceeded")
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
