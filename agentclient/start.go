package agentclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/internal/clip"
	"github.com/secops-agent/investigator/internal/termtext"
	"github.com/secops-agent/investigator/investigation"
)

// Start says what to start: one Investigation workflow.
type Start struct {
	// ID is the workflow ID (WorkflowID makes one for an alert).
	ID string
	// Summary is the static summary the Web UI shows; clipped to 200 bytes.
	Summary string
	// Input is the workflow's input; Start fills in its SearchAttributes.
	Input investigation.Input
}

// Start starts an Investigation workflow, under the call timeout, with
// the search attributes the namespace has registered: a missing one is
// named in a warning on warn, and the investigation runs without it rather
// than not at all. An ID already in use is an error.
func (c *Client) Start(ctx context.Context, s Start, warn io.Writer) error {
	return c.call(ctx, func(ctx context.Context) error {
		registered, attrs := c.searchAttributes(ctx, s.Input.AlertID, warn)
		s.Input.SearchAttributes = registered
		s.Input.Summary = clip.String(s.Summary, 200)
		_, err := c.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:                       s.ID,
			TaskQueue:                c.cfg.TaskQueue,
			WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
			// Not a closed investigation's ID either: a new run would
			// share its session, and get its turns back. Without the
			// error flag the SDK would return the existing run instead.
			WorkflowIDReusePolicy:                    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			WorkflowExecutionErrorWhenAlreadyStarted: true,
			StaticSummary:                            staticSummary(s.Summary),
			TypedSearchAttributes:                    attrs,
		}, investigation.WorkflowName, s.Input)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return fmt.Errorf("investigation %s exists already (open or closed), and an ID is never used twice", s.ID)
		}
		return err
	})
}

// staticSummary is a start's summary as the Web UI shows it: Markdown, in
// which an alert title's [x](https://evil) or **Verdict** would be a link or
// pass for our own label (termtext.Markdown), on one line, in 200 bytes.
func staticSummary(s string) string {
	return termtext.MarkdownClipped(termtext.Line(s), 200)
}

// WarnSearchAttributes writes to warn which of the investigation's search
// attributes the namespace lacks, once, before several starts that do not.
func (c *Client) WarnSearchAttributes(ctx context.Context, warn io.Writer) {
	_ = c.call(ctx, func(ctx context.Context) error {
		c.searchAttributes(ctx, "", warn)
		return nil
	})
}

// searchAttributes returns which of the investigation's custom search
// attributes (AlertId, Verdict) the namespace has registered as Keyword,
// and the start options' attributes for those.
func (c *Client) searchAttributes(ctx context.Context, alertID string, warn io.Writer) ([]string, temporal.SearchAttributes) {
	namespace := c.cfg.Namespace
	l, err := c.attributes(ctx)
	if err != nil {
		fmt.Fprintf(warn, "warning: could not list the namespace's search attributes (%v); starting without AlertId and Verdict\n", FailureMessage(err))
		return nil, temporal.NewSearchAttributes()
	}
	if len(l.missing) > 0 {
		fmt.Fprintf(warn, "warning: search attribute(s) %v not registered on namespace %s; the Web UI cannot filter on them "+
			"(the worker registers them where the server allows it; else: temporal operator search-attribute create --name NAME --type Keyword)\n", l.missing, namespace)
	}
	var attrs []temporal.SearchAttributeUpdate
	if slices.Contains(l.registered, investigation.SearchAttribute) {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(investigation.SearchAttribute).ValueSet(alertID))
	}
	return l.registered, temporal.NewSearchAttributes(attrs...)
}

// LoadSearchAttributes lists the namespace's search attributes ahead of a
// Start (the starter does it while it stores the alert), which then needs
// no listing of its own. A failure is left for Start to report.
func (c *Client) LoadSearchAttributes(ctx context.Context) {
	_ = c.call(ctx, func(ctx context.Context) error {
		_, err := c.attributes(ctx)
		return err
	})
}

// attributes is the namespace's search-attribute listing: read once when
// every attribute is there; a listing that failed or lacks one is read
// again at the next start (a worker may register them meanwhile).
func (c *Client) attributes(ctx context.Context) (attributeList, error) {
	c.attrsMu.Lock()
	defer c.attrsMu.Unlock()
	if c.attrs != nil {
		return *c.attrs, nil
	}
	l, err := listAttributes(ctx, c.tc.OperatorService(), c.cfg.Namespace)
	if err == nil && len(l.missing) == 0 {
		c.attrs = &l
	}
	return l, err
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// WorkflowID is readable and unique per start: a prefix ("investigation",
// "eval"), a name (the alert ID, the case) and a UTC time.
func WorkflowID(prefix, name string, now time.Time) string {
	return prefix + "-" + unsafeID.ReplaceAllString(name, "_") + "-" + now.UTC().Format("20060102-150405.000")
}

// Result waits for an investigation to close (following continue-as-new)
// and returns its result, or its failure; ctx bounds the wait: when it
// expires, the error is ctx's.
func (c *Client) Result(ctx context.Context, id string) (investigation.Result, error) {
	var res investigation.Result
	err := c.tc.GetWorkflow(ctx, id, "").Get(ctx, &res)
	var server *serviceerror.DeadlineExceeded
	if _, ok := ctx.Deadline(); ok && (errors.As(err, &server) || errors.Is(err, context.DeadlineExceeded)) {
		// The server gives up a long poll a moment before ctx's own deadline,
		// so the caller could see a "deadline exceeded" with ctx still live.
		<-ctx.Done()
		return res, ctx.Err()
	}
	return res, err
}
