package server

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// SingleRootSubscription refuses a subscription operation that selects
// more than one root field (aliases and fragments included), as the
// GraphQL specification's "Single root field" rule says: without it
// gqlgen's executor answers such a document with an internal error.
type SingleRootSubscription struct{}

var _ graphql.OperationContextMutator = SingleRootSubscription{}

// ExtensionName implements graphql.HandlerExtension.
func (SingleRootSubscription) ExtensionName() string { return "SingleRootSubscription" }

// Validate implements graphql.HandlerExtension.
func (SingleRootSubscription) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext refuses a subscription with several root fields
// as a validation error (a request error: no data).
func (SingleRootSubscription) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil || oc.Operation.Operation != ast.Subscription {
		return nil
	}
	if n := len(graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{"Subscription"})); n > 1 {
		err := gqlerror.Errorf("a subscription selects exactly one root field; this one selects %d", n)
		errcode.Set(err, errcode.ValidationFailed)
		return err
	}
	return nil
}
