package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/secops-agent/investigator/investigation"
)

// searchAttributes returns which of the investigation's custom search
// attributes (AlertId, Verdict) the namespace has registered as Keyword,
// and the start options' attributes for those. A missing one is named in a
// warning: the investigation runs without it rather than not at all.
func searchAttributes(ctx context.Context, c client.Client, namespace, alertID string, warn io.Writer) ([]string, temporal.SearchAttributes) {
	var registered []string
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		fmt.Fprintf(warn, "warning: could not list the namespace's search attributes (%v); starting without AlertId and Verdict\n", failureMessage(err))
		return nil, temporal.NewSearchAttributes()
	}
	var missing []string
	for _, name := range []string{investigation.SearchAttribute, investigation.VerdictAttribute} {
		if resp.GetCustomAttributes()[name] == enums.INDEXED_VALUE_TYPE_KEYWORD {
			registered = append(registered, name)
		} else {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(warn, "warning: search attribute(s) %v not registered on namespace %s; the Web UI cannot filter on them "+
			"(register with: temporal operator search-attribute create --name NAME --type Keyword)\n", missing, namespace)
	}
	var attrs []temporal.SearchAttributeUpdate
	if slices.Contains(registered, investigation.SearchAttribute) {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(investigation.SearchAttribute).ValueSet(alertID))
	}
	return registered, temporal.NewSearchAttributes(attrs...)
}
