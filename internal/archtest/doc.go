// Package archtest holds the repository's architecture test: which packages
// may use Temporal's SDK. It has no code of its own.
package archtest
