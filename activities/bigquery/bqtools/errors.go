package bqtools

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

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
			reason := ""
			for _, it := range ge.Errors {
				reason = cmp.Or(reason, it.Reason)
			}
			return reject(what, reason, apiMessage(ge))
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	var be *bigquery.Error
	if errors.As(err, &be) {
		if !dryRun && transientReasons[be.Reason] {
			return fmt.Errorf("%s: %w", what, err)
		}
		return reject(what, be.Reason, be.Message)
	}
	var me bigquery.MultiError
	if errors.As(err, &me) && len(me) > 0 {
		return classify(what, me[0], dryRun)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// reject is BigQuery's failure as the model reads it: what failed, its
// reason code in parentheses (FailureKind reads it from there) and its message.
func reject(what, reason, msg string) error {
	if reason != "" {
		return tools.Reject("%s failed (%s): %s", what, reason, msg)
	}
	return tools.Reject("%s failed: %s", what, msg)
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

// bigQueryReasons are the ErrorProto reasons of BigQuery's error table that
// FailureKind passes on; any other reads as "unknown".
var bigQueryReasons = wordSet(`accessDenied backendError badRequest billingNotEnabled billingTierLimitExceeded
	blocked bytesBilledLimitExceeded duplicate internalError invalid invalidQuery invalidUser jobBackendError
	jobInternalError jobRateLimitExceeded notFound notImplemented quotaExceeded rateLimitExceeded
	resourceInUse resourcesExceeded responseTooLarge stopped tableUnavailable timeout`)

// bigQueryFailure matches the start of what reject writes, the phase from
// classify's callers and the reason code.
var bigQueryFailure = regexp.MustCompile(`^(run the query|dry run of the query|read the query results?|find the query result|read the schema of \S+)( \(job timeout [^)]*\))? failed(?: \((\w+)\))?: `)

// failureKinds map the start of this package's refusals to what
// FailureKind says of them, in order.
var failureKinds = []struct{ prefix, kind string }{
	{"query refused (nothing was sent to BigQuery): ", "refused by the SQL guard before BigQuery saw the query"},
	{"query refused: BigQuery reads it as a ", "refused after the dry run: not a SELECT statement"},
	{"query refused: the investigation's BigQuery scan budget ", "refused: over what is left of the investigation's scan budget"},
	{"query refused: the query would scan ", "refused: over the scan limit of a query (max_scan_bytes)"},
	{"query refused: it ", "refused after the dry run: it reads a table, routine or property graph that is not allowed"},
	{"the query behind this handle is refused now", "refused: the query behind the handle does not pass the SQL guard"},
	{"the job behind this handle ", "refused: the job behind the handle is not a SELECT query"},
	{"handle ", "refused: the handle is not one of this session's results"},
	{"no query result for handle ", "no result for the handle (results are kept for about a day)"},
	{"offset ", "the offset is past the last row"},
	{"no runbook named ", "no runbook of that name"},
	{"missing required argument ", "an argument was refused"},
	{"argument ", "an argument was refused"},
}

// FailureKind says what a failed call of these tools was, from a fixed
// set: which guard layer refused it, or BigQuery's reason code, or false
// for a message this package did not write. It never returns text of msg:
// BigQuery's messages can quote a row ("Bad int64 value: ...",
// ERROR(message)), and what introspection reads of a failure must not.
func FailureKind(msg string) (string, bool) {
	if m := bigQueryFailure.FindStringSubmatch(msg); m != nil {
		phase := map[string]string{"run the query": "the query job", "dry run of the query": "the dry run",
			"read the query results": "reading the results", "read the query result": "reading the results",
			"find the query result": "finding the result"}[m[1]]
		if phase == "" {
			phase = "reading a schema"
		}
		switch {
		case m[3] == "":
			return "BigQuery failed " + phase + " (no reason given)", true
		case bigQueryReasons[m[3]]:
			return "BigQuery failed " + phase + " (" + m[3] + ")", true
		}
		return "BigQuery failed " + phase + " (an unknown reason)", true
	}
	if strings.HasPrefix(msg, "table ") {
		if strings.Contains(msg, " is not one of the tables you may use") {
			return "refused: the table is not one of the configured tables", true
		}
		if strings.Contains(msg, " is configured but does not exist in BigQuery project ") {
			return "the configured table does not exist in BigQuery", true
		}
	}
	for _, k := range failureKinds {
		if strings.HasPrefix(msg, k.prefix) {
			return k.kind, true
		}
	}
	return "", false
}
