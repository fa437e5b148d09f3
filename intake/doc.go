// Package intake is the pure logic of the alert intake (`starter intake`):
// unwrapping the envelopes alerts arrive in (Unwrap), an alert's
// source-specific identity (Identify) and the principal indicators it is
// grouped by (Keys), the order of severities (Rank), and the contract
// between the intake processes and the admission workflow (Settings,
// Alert, Outcome, Status). It does no I/O and knows nothing of Temporal:
// the Pub/Sub and HTTP sources live in intake/source, the admission
// workflow in workflows/admission.go. design/intake.md explains the whole.
package intake
