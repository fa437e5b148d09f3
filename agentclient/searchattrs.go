package agentclient

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/secops-agent/investigator/investigation"
)

// investigationAttributes are the custom search attributes an investigation
// sets, all of type Keyword.
var investigationAttributes = []string{investigation.SearchAttribute, investigation.VerdictAttribute}

// attributeList is which of the investigation's search attributes a
// namespace has registered as Keyword, and which it lacks.
type attributeList struct {
	registered, missing []string
	// mistyped are the missing ones registered under another type, which
	// no registration can fix.
	mistyped map[string]enums.IndexedValueType
}

// listAttributes reads the namespace's custom search attributes, the one
// listing the starter's check and the worker's registration share.
func listAttributes(ctx context.Context, op operatorservice.OperatorServiceClient, namespace string) (attributeList, error) {
	resp, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return attributeList{}, err
	}
	l := attributeList{mistyped: map[string]enums.IndexedValueType{}}
	for _, name := range investigationAttributes {
		switch t, ok := resp.GetCustomAttributes()[name]; {
		case t == enums.INDEXED_VALUE_TYPE_KEYWORD:
			l.registered = append(l.registered, name)
		case ok:
			l.mistyped[name] = t
			l.missing = append(l.missing, name)
		default:
			l.missing = append(l.missing, name)
		}
	}
	return l, nil
}

// SearchAttributeError says which of the investigation's search attributes
// are not registered on a namespace after an attempt to register them.
type SearchAttributeError struct {
	Namespace string
	Missing   []string
	// Reason is why, in a few words: the server's answer, a type clash.
	Reason string
}

func (e *SearchAttributeError) Error() string {
	return fmt.Sprintf("search attribute(s) %s not registered on namespace %s (%s); investigations run without them "+
		"(register them once with `temporal operator search-attribute create --name NAME --type Keyword`, "+
		"on Temporal Cloud with `tcld namespace search-attributes add`)", strings.Join(e.Missing, ", "), e.Namespace, e.Reason)
}

// RegisterSearchAttributes registers those of the investigation's search
// attributes the namespace lacks, as Keyword, and returns the ones it
// added. It is idempotent and safe for workers that start together: an
// attribute another worker added first ("already exists") counts as
// registered. It waits, within ctx, until the listing shows them, so that a
// starter that checks next sees them. What stays unregistered is named in a
// *SearchAttributeError: a server that refuses (Temporal Cloud does not
// allow it through this API), a name registered under another type, ctx
// ending.
func RegisterSearchAttributes(ctx context.Context, op operatorservice.OperatorServiceClient, namespace string) ([]string, error) {
	failed := func(missing []string, reason string) error {
		return &SearchAttributeError{Namespace: namespace, Missing: missing, Reason: reason}
	}
	l, err := listAttributes(ctx, op, namespace)
	if err != nil {
		return nil, failed(investigationAttributes, "cannot list them: "+registerReason(ctx, err))
	}
	if len(l.missing) == 0 {
		return nil, nil
	}
	add := map[string]enums.IndexedValueType{}
	var names, clashed, clashes []string
	for _, name := range l.missing {
		if t, ok := l.mistyped[name]; ok {
			clashed = append(clashed, name)
			clashes = append(clashes, fmt.Sprintf("%s is registered as %s, not Keyword", name, t))
		} else {
			names = append(names, name)
			add[name] = enums.INDEXED_VALUE_TYPE_KEYWORD
		}
	}
	if len(add) > 0 {
		_, err := op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: add})
		var exists *serviceerror.AlreadyExists
		if err != nil && !errors.As(err, &exists) {
			return nil, failed(l.missing, registerReason(ctx, err))
		}
		if err := waitListed(ctx, op, namespace, names); err != nil {
			return nil, failed(l.missing, err.Error())
		}
	}
	if len(clashes) > 0 {
		return names, failed(clashed, strings.Join(clashes, "; "))
	}
	return names, nil
}

// waitListed waits until the listing shows names as Keyword: a new
// attribute may take a moment to show.
func waitListed(ctx context.Context, op operatorservice.OperatorServiceClient, namespace string, names []string) error {
	for {
		l, err := listAttributes(ctx, op, namespace)
		if err == nil && !slices.ContainsFunc(names, func(n string) bool { return slices.Contains(l.missing, n) }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("added, but not listed before the deadline")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// registerReason words why listing or adding failed.
func registerReason(ctx context.Context, err error) string {
	var denied *serviceerror.PermissionDenied
	var unimpl *serviceerror.Unimplemented
	switch {
	case errors.As(err, &denied), errors.As(err, &unimpl):
		return "the server does not allow registering them through its API: " + err.Error()
	case ctx.Err() != nil:
		return "Temporal did not answer in time"
	}
	return err.Error()
}
