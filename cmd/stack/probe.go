package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Probe tells whether a service serves. Check returns nil when it does and
// otherwise why not, in a few words.
type Probe interface {
	Check(ctx context.Context, s *Stack, name string) error
}

// probeTimeout bounds one check: a service that takes longer to answer is
// not ready yet.
const probeTimeout = 2 * time.Second

// TCP is ready when its port accepts connections.
type TCP struct{ Port string }

func (p TCP) Check(ctx context.Context, s *Stack, _ string) error {
	return dialOK(ctx, s.addr(p.Port))
}

func dialOK(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: probeTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// HTTP is ready when a request to its port answers as expected.
type HTTP struct {
	Port   string
	Method string // GET when empty
	Path   string
	Header map[string]string
	// Status is the status wanted; 0 takes any 2xx, -1 any answer at all.
	Status int
	// BodyPrefix, when set, must start the body.
	BodyPrefix string
}

func (p HTTP) Check(ctx context.Context, s *Stack, _ string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, orDefault(p.Method, http.MethodGet), "http://"+s.addr(p.Port)+p.Path, nil)
	if err != nil {
		return err
	}
	for k, v := range p.Header {
		req.Header.Set(k, strings.ReplaceAll(v, "{UI}", s.UIURL()))
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch {
	case p.Status == -1:
	case p.Status == 0 && (resp.StatusCode < 200 || resp.StatusCode > 299),
		p.Status > 0 && resp.StatusCode != p.Status:
		return fmt.Errorf("%s %s answered %s", req.Method, p.Path, resp.Status)
	}
	if p.BodyPrefix != "" && !bytes.HasPrefix(body, []byte(p.BodyPrefix)) {
		return fmt.Errorf("%s %s answered something else than %q", req.Method, p.Path, p.BodyPrefix)
	}
	return nil
}

// probeClient never follows redirects or reuses a connection across checks
// (a service restarting on the same port must be seen as new).
var probeClient = &http.Client{
	Transport:     &http.Transport{DisableKeepAlives: true}, // and no proxy
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// GRPCHealth is ready when the standard gRPC health service reports Service
// as SERVING (what `temporal operator cluster health` asks the frontend).
type GRPCHealth struct {
	Port    string
	Service string
}

func (p GRPCHealth) Check(ctx context.Context, s *Stack, _ string) error {
	// A closed port fails at once; gRPC alone would retry until the deadline.
	if err := dialOK(ctx, s.addr(p.Port)); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	conn, err := grpc.NewClient(s.addr(p.Port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: p.Service})
	if err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health of %s: %s", p.Service, resp.GetStatus())
	}
	return nil
}

// LogLine is ready once the service's log holds Text.
type LogLine struct{ Text string }

func (p LogLine) Check(_ context.Context, s *Stack, name string) error {
	b, err := os.ReadFile(filepath.Join(s.LogDir(), name+".log"))
	if err != nil {
		return err
	}
	if !bytes.Contains(b, []byte(p.Text)) {
		return fmt.Errorf("no %q in its log yet", p.Text)
	}
	return nil
}
