package bigquery

import (
	"context"
	"errors"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/investigation"
	"github.com/secops-agent/investigator/toolcall"
	"github.com/secops-agent/investigator/tools"
)

// AgentTool returns bigquery_agent, the investigation's tool that starts
// this sub-agent. The workflow runs it as a BigQueryAgent child workflow,
// never through Call.
func AgentTool() tools.Tool { return bigQueryAgent{} }

type bigQueryAgent struct{}

func (bigQueryAgent) Purpose() string {
	return "Answer a concrete question from the security logs in BigQuery (logins, processes, network, DNS) through the BigQuery sub-agent."
}

// RunsAs says that bigquery_agent runs the BigQuery sub-agent as a child
// workflow.
func (bigQueryAgent) RunsAs() toolcall.Tool {
	return toolcall.Tool{Kind: toolcall.ChildWorkflow, Workflow: investigation.BigQueryWorkflowName}
}

func (bigQueryAgent) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name: toolcall.BigQueryAgent,
		Description: "Ask the BigQuery sub-agent a concrete question about the security logs in BigQuery (authentication, process and network events, cloud audit logs). " +
			"It finds the tables, writes and runs read-only SQL, and answers in text with the evidence. " +
			"Returns {answer, child_workflow_id, child_run_id}. Name hosts, users, IPs and a time window, " +
			"e.g. \"Find process launches on web-server-prod-01 between 2026-11-20 08:40 and 09:30 UTC\".",
		Parameters: &genai.Schema{
			Type:       genai.TypeObject,
			Properties: map[string]*genai.Schema{"request": {Type: genai.TypeString, Description: "The log question, self-contained: the sub-agent sees nothing else."}},
			Required:   []string{"request"},
		},
	}
}

func (bigQueryAgent) Call(context.Context, map[string]any) (any, error) {
	return nil, errors.New("bigquery_agent runs as a child workflow, not as an activity")
}
