// Package deps pins the module's dependencies while the code is being written.
package deps

import (
	_ "cloud.google.com/go/bigquery"
	_ "cloud.google.com/go/firestore"
	_ "github.com/spf13/cobra"
	_ "github.com/stretchr/testify/require"
	_ "go.temporal.io/sdk/client"
	_ "go.temporal.io/sdk/testsuite"
	_ "go.temporal.io/sdk/worker"
	_ "go.temporal.io/sdk/workflow"
	_ "google.golang.org/genai"
	_ "google.golang.org/api/option"
	_ "gopkg.in/yaml.v3"
)
