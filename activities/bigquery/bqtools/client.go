package bqtools

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"weak"

	"cloud.google.com/go/bigquery"
	bqv2 "google.golang.org/api/bigquery/v2"
	"google.golang.org/api/option"
)

// NewClient connects to BigQuery. With emulatorHost empty it reaches the real
// service with Application Default Credentials, in project (detected from
// the credentials when empty). Otherwise it reaches the BigQuery emulator at
// emulatorHost ("127.0.0.1:9050"), without authentication; project is then
// required. The Go client does not read BIGQUERY_EMULATOR_HOST itself, so
// callers pass it here. opts are appended, for example a custom HTTP client.
//
// It also opens the REST service with the same options, for the tools' dry
// run (see clientBackend); Tools finds it, and whether the client reaches
// the emulator, by the client.
func NewClient(ctx context.Context, project, emulatorHost string, opts ...option.ClientOption) (*bigquery.Client, error) {
	what := "BigQuery"
	all := opts
	if emulatorHost == "" {
		if project == "" {
			project = bigquery.DetectProjectID
		}
	} else {
		if project == "" {
			return nil, errors.New("connect to the BigQuery emulator: a project ID is required")
		}
		host := strings.TrimSuffix(emulatorHost, "/")
		if !strings.HasPrefix(host, "http://") && !strings.HasPrefix(host, "https://") {
			host = "http://" + host
		}
		what = "the BigQuery emulator at " + emulatorHost
		all = append([]option.ClientOption{option.WithEndpoint(host), option.WithoutAuthentication()}, opts...)
	}
	c, err := bigquery.NewClient(ctx, project, all...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", what, err)
	}
	rest, err := bqv2.NewService(ctx, all...)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("connect to %s: %w", what, err)
	}
	clientInfos.Store(weak.Make(c), clientInfo{rest: rest, emulator: emulatorHost != ""})
	runtime.AddCleanup(c, func(k weak.Pointer[bigquery.Client]) { clientInfos.Delete(k) }, weak.Make(c))
	return c, nil
}

// clientInfo is what NewClient knows of a client it made.
type clientInfo struct {
	rest     *bqv2.Service
	emulator bool
}

// clientInfos maps the clients NewClient made to their clientInfo, without
// keeping a client alive: an entry goes when its client does.
var clientInfos sync.Map // weak.Pointer[bigquery.Client] -> clientInfo

// infoOf returns what NewClient knew of c; for a client made elsewhere,
// no REST service and the real service (whose checks are the stricter).
func infoOf(c *bigquery.Client) clientInfo {
	v, _ := clientInfos.Load(weak.Make(c))
	info, _ := v.(clientInfo)
	return info
}
