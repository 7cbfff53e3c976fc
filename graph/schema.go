package graph

import (
	"maps"
	"sync"

	"github.com/vektah/gqlparser/v2/ast"

	"bothy.example.com/bothy/graph/generated"
)

// Schema returns the schema Bothy serves: the generated one without the
// directives it does not honour. gqlparser's prelude declares @defer, so
// introspection advertised it, but Bothy answers every operation in one
// response and a deferred fragment was silently left out of it; without
// the declaration an operation using @defer is refused by validation
// (docs/clients.md#incremental-delivery). The generated schema itself is
// left untouched (it is shared); the copy is made once.
var Schema = sync.OnceValue(func() *ast.Schema {
	full := generated.NewExecutableSchema(generated.Config{}).Schema()
	served := *full
	served.Directives = maps.Clone(full.Directives)
	for _, name := range unhonoured {
		delete(served.Directives, name)
	}
	return &served
})

// unhonoured lists the prelude's directives Bothy does not carry out.
var unhonoured = []string{"defer"}
