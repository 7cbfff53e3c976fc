package trusteddocs

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
)

// Code is the GraphQL error code of an operation refused because its hash
// is not trusted; the server's presenter answers it as validation_failed
// with the reason untrusted_document.
const Code = "UNTRUSTED_DOCUMENT"

func init() { errcode.RegisterErrorType(Code, errcode.KindProtocol) }

// Guard is the gqlgen extension that refuses, after validation and before
// any resolver runs, every operation whose hash is not in Trusted.
type Guard struct {
	trusted Set
	mu      sync.Mutex
	// seen remembers the verdict per document text and operation name (by
	// their SHA-256): printing a document for its hash costs about as much
	// as parsing it, and clients send the same few documents again and
	// again.
	seen *simplelru.LRU[[sha256.Size]byte, bool]
}

var _ interface {
	graphql.OperationContextMutator
	graphql.HandlerExtension
} = (*Guard)(nil)

// seenEntries bounds Guard's memory of verdicts: 32 bytes of key each.
const seenEntries = 4096

// NewGuard returns a Guard that lets the operations of trusted run, and the
// operations of also (documents the server itself runs, such as the REST
// shim's stored operations), which it hashes here.
//
// Errors: a document of also that does not parse.
func NewGuard(trusted Set, also ...string) (*Guard, error) {
	all := Set{}
	for h := range trusted {
		all[h] = struct{}{}
	}
	for _, text := range also {
		doc, err := parser.ParseQuery(&ast.Source{Input: text})
		if err != nil {
			return nil, err
		}
		for _, op := range doc.Operations {
			all[Hash(doc, op)] = struct{}{}
		}
	}
	seen, err := simplelru.NewLRU[[sha256.Size]byte, bool](seenEntries, nil)
	if err != nil {
		return nil, err
	}
	return &Guard{trusted: all, seen: seen}, nil
}

// ExtensionName implements graphql.HandlerExtension.
func (*Guard) ExtensionName() string { return "TrustedDocuments" }

// Validate implements graphql.HandlerExtension.
func (g *Guard) Validate(graphql.ExecutableSchema) error {
	if g == nil || g.trusted == nil {
		return errors.New("trusteddocs: a Guard needs NewGuard")
	}
	return nil
}

// MutateOperationContext refuses the operation of oc unless its hash is
// trusted.
func (g *Guard) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil {
		return nil
	}
	key := sha256.Sum256([]byte(oc.OperationName + "\x00" + oc.RawQuery))
	g.mu.Lock()
	ok, known := g.seen.Get(key)
	g.mu.Unlock()
	if !known {
		ok = g.trusted.Has(Hash(oc.Doc, oc.Operation))
		g.mu.Lock()
		g.seen.Add(key, ok)
		g.mu.Unlock()
	}
	if ok {
		return nil
	}
	err := gqlerror.Errorf("this instance runs trusted documents only (graphql.trusted_documents), and this operation is not one of them")
	errcode.Set(err, Code)
	return err
}
