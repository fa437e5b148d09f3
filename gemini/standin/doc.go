// Package standin is the offline Gemini stand-in's scripted investigation:
// what bin/gemini-standin answers when nobody has a Gemini key, so that a
// newcomer sees the whole product run (plan, tool calls, the BigQuery
// sub-agent as a child workflow that learns memories, reflection that
// changes the plan, a verdict) without a model. It is a script, not a
// model, and every answer it writes says so.
//
// # What it reads
//
// Never the wording of a prompt. It tells requests apart by the response
// schema's title (internal/prompt's Phase constants) and the functions a
// request declares (toolcall's names; the BigQuery sub-agent's tools by the
// names their declarations give), and reads only:
//   - the alert's ID on its prompt.AlertIDLabel line, and the ID of the step
//     to run on the line after prompt.StepHeading;
//   - the planner's tool catalog, lines "- `name`: purpose", which
//     tools.Registry.Catalog writes (no line of a data block can start so,
//     so an alert cannot offer the stand-in a tool);
//   - values inside data blocks (internal/prompt): the alert's JSON (block
//     "alert") or its indicators ("alert indicators"), the sub-agent's
//     request, recalled memories, the plan in progress, the conversation,
//     the standing verdict, step results;
//   - function responses, which are structured.
//
// Each answer it writes in a tool loop ends with a line "Stand-in record:
// {json}" holding what it found. The agent passes those answers on as data
// (step results, the sub-agent's answer), so reflection and the conclusion
// read the record back from their data blocks.
//
// # The script, phase by phase
//
//   - plan: step_1 reads the alert (get_alert) and searches earlier alerts
//     for its source address, or its first public address (search_alerts,
//     on the field that holds it: == for a field, array-contains for a list);
//     step_2 reads up to three earlier alerts found (get_alert); step_3,
//     when the alert names where the activity came from (an IP in a field
//     named remote, source, src, client or caller) and the catalog lists
//     bigquery_agent, asks the logs whether that address logged in to the
//     alert's host on its day; otherwise step_3 weighs the evidence without
//     tools. Only tools the catalog lists are named.
//   - step turns: by the functions the step declares, the calls above (two
//     in parallel in step_1), then an answer with the findings.
//   - the BigQuery sub-agent (its requests declare bigquery_query): with a
//     recalled memory that names a table, straight to that table's schema;
//     else bigquery_tables and every table's schema; the table with a time,
//     source address, host, user and success flag is the login table. For a
//     request naming a day: the address's events per host, type and outcome,
//     and its successful logins (two SELECTs in one turn); the login after
//     failures on its host is the finding. For a request naming a time of
//     day: the login at that time, then every event of that user on that
//     host in the following hour.
//   - introspect: from the session's structure alone (the schemas it read
//     and its SQL without values; introspection sees no row), one typed
//     claim about the table of logins: which columns tell its events apart
//     after a search for an address's logins (column_meaning), or that a
//     session's events share its login's host and user (join_key); unless
//     a recalled memory already says it. Recalled memories that named the
//     table of logins are helpful, those that named a table read without
//     logins harmful.
//   - reflect: the finished step's findings become insights; a login after
//     failures adds a step asking what that session did (a second child,
//     which recalls the first one's memory once a person approved it); a
//     search that found no earlier
//     alert cancels the step planned to read them. Achieved once a login and
//     its session are known.
//   - conclude: one rule. A successful login from the source after failed
//     attempts is true_positive, high confidence; a login without failures,
//     or logs without a login, undetermined, medium; nothing from the logs,
//     undetermined, low. Evidence items name their step and the tool that
//     showed them (findings without a tool stay in the report only); the
//     report has the five sections and says it was written by the stand-in.
//   - mode: a follow-up is answered directly once every step of the plan has
//     finished (the stand-in cannot read the question), else the plan goes
//     on. The direct answer looks at the alert once (get_alert) and restates
//     the last conclusion's key findings; the review that follows it keeps
//     the standing verdict.
//   - embeddings: Embedding, a topic-count vector: a request about logins
//     lands near a claim about the login table, so a later child recalls
//     what an earlier one learned, once approved.
//
// ask_user is never called: the demo never waits for a person. Everything
// is a function of the request, so the same requests get the same answers.
//
// # The examples
//
// examples/alerts/guardduty-ssh-bruteforce.json (SSH brute force from
// 198.51.100.23 against web-server-prod-01): step_1 reads the alert and
// finds the earlier brute force on bastion-01; step_2 reads it; step_3's
// child finds 214 failures and then "deploy" logging in by password at
// 08:14:52 UTC and proposes a claim about event_type and success;
// reflection adds step_4, whose child lists the session's sudo commands and
// proposes a claim about host and user; the verdict is true_positive, high.
// Once both claims are approved (starter memory approve ID), the next run's
// children recall them (rated helpful) and go straight to the login table.
//
// examples/alerts/scc-cryptominer.json (a miner on batch-worker-7) names no
// source address: step_1 finds no earlier alert with the mining pool's
// address, reflection cancels step_2, step_3 weighs the alert without
// tools, no child workflow runs, and the verdict is undetermined, low. A
// follow-up (starter ask ID "...") gets a direct answer.
package standin
