// Package bigquery is the BigQuery sub-agent: read this first.
//
// The investigation's bigquery_agent tool (tool.go) asks it one concrete log
// question. The workflow (workflows/bigquery.go, the only part outside this
// folder) runs it as a child workflow of the investigation, and everything
// else it has lives here:
//
//   - activities.go: RecallMemories (embed the request, Firestore vector
//     search over approved memories), SubAgentTurn (one model turn with
//     the BigQuery tools), Introspect (what the session taught, from its
//     structure alone, checked in code before it is proposed),
//     UpdateMemories (propose claims, score memories, prune) and
//     DeliverAnswer (store the answer as the parent's tool result);
//   - session.go: the session as introspection sees it (schemas read, SQL
//     without values, row counts, errors), built from its tool calls;
//   - types.go: their inputs and outputs, and the child's Request;
//   - prompts/: the sub-agent's and introspection's prompts;
//   - bqtools/: the BigQuery tools (tables, schema, query, result pages,
//     runbooks), the tables config and the read-only SQL guard;
//   - memory/: the Firestore memory store, the memory lifecycle (proposed,
//     approved or rejected, votes, pruning) and the claim check.
//
// The sub-agent's model calls go through activities.Model, shared with the
// investigation, and its tool calls through the investigation's CallTool
// activity with the Toolset toolset, so retries, heartbeats and the
// transcript store work the same way in both.
package bigquery

// Toolset names the sub-agent's tools in the investigation's CallTool.
const Toolset = "bigquery"
