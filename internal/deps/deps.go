//go:build tools

// Package deps keeps cloud.google.com/go/bigquery, which the brief requires
// and the BigQuery sub-agent will use, in go.mod until code imports it.
package deps

import (
	_ "cloud.google.com/go/bigquery"
)
