package bq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/option"
)

// NewClient connects to BigQuery. With emulatorHost empty it reaches the real
// service with Application Default Credentials, in project (detected from
// the credentials when empty). Otherwise it reaches the BigQuery emulator at
// emulatorHost ("127.0.0.1:9050"), without authentication; project is then
// required. The Go client does not read BIGQUERY_EMULATOR_HOST itself, so
// callers pass it here. opts are appended, for example a custom HTTP client.
func NewClient(ctx context.Context, project, emulatorHost string, opts ...option.ClientOption) (*bigquery.Client, error) {
	if emulatorHost == "" {
		if project == "" {
			project = bigquery.DetectProjectID
		}
		c, err := bigquery.NewClient(ctx, project, opts...)
		if err != nil {
			return nil, fmt.Errorf("connect to BigQuery: %w", err)
		}
		return c, nil
	}
	if project == "" {
		return nil, errors.New("connect to the BigQuery emulator: a project ID is required")
	}
	host := strings.TrimSuffix(emulatorHost, "/")
	if !strings.HasPrefix(host, "http://") && !strings.HasPrefix(host, "https://") {
		host = "http://" + host
	}
	all := append([]option.ClientOption{option.WithEndpoint(host), option.WithoutAuthentication()}, opts...)
	c, err := bigquery.NewClient(ctx, project, all...)
	if err != nil {
		return nil, fmt.Errorf("connect to the BigQuery emulator at %s: %w", emulatorHost, err)
	}
	return c, nil
}
