package bqtools

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"

	"github.com/secops-agent/investigator/tools"
)

// transientReasons are BigQuery error reasons worth retrying.
var transientReasons = map[string]bool{
	"backendError": true, "internalError": true, "jobBackendError": true, "jobInternalError": true,
	"rateLimitExceeded": true, "jobRateLimitExceeded": true, "quotaExceeded": true,
}

// classify turns a BigQuery error into a Rejection (which the model sees)
// when retrying cannot help: an invalid query, a missing table, access
// denied, the bytes-billed cap. Transient failures (5xx, 429, rate limits,
// backend errors) are returned as they are, for Temporal to retry. In a dry
// run (dryRun), any error in the job status is about the query itself.
func classify(what string, err error, dryRun bool) error {
	if err == nil || tools.IsRejection(err) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", what, err)
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		if ge.Code == http.StatusTooManyRequests || ge.Code >= 500 {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ge.Code == http.StatusForbidden {
			for _, it := range ge.Errors {
				if transientReasons[it.Reason] {
					return fmt.Errorf("%s: %w", what, err)
				}
			}
		}
		if ge.Code >= 400 {
			return tools.Reject("%s failed: %s", what, apiMessage(ge))
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	var be *bigquery.Error
	if errors.As(err, &be) {
		if !dryRun && transientReasons[be.Reason] {
			return fmt.Errorf("%s: %w", what, err)
		}
		return tools.Reject("%s failed: %s", what, be.Message)
	}
	var me bigquery.MultiError
	if errors.As(err, &me) && len(me) > 0 {
		return classify(what, me[0], dryRun)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func apiMessage(ge *googleapi.Error) string {
	if ge.Message != "" {
		return ge.Message
	}
	for _, it := range ge.Errors {
		if it.Message != "" {
			return it.Message
		}
	}
	return ge.Error()
}

func isNotFound(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusNotFound
}
