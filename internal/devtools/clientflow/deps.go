package clientflow

// The runtime packages that the generated clients import. The clients are
// generated at test time only, so nothing else in the module imports these;
// naming them here keeps them (pinned) in go.mod.
import (
	_ "github.com/Khan/genqlient/graphql"
	_ "github.com/oapi-codegen/runtime"
	_ "github.com/oapi-codegen/runtime/types"
)
