package apilint

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	apidoc "bothy.example.com/bothy/docs/api"
)

// TestEveryOpenAPIElementDescribed: every operation (summary and
// description), parameter, request body, response, component schema and
// schema property of docs/api/openapi.yaml carries a description.
func TestEveryOpenAPIElementDescribed(t *testing.T) {
	t.Run("document", func(t *testing.T) {
		doc := loadDoc(t, apidoc.OpenAPI())
		for _, m := range undescribed(doc) {
			t.Errorf("no description: %s", m)
		}
	})
	t.Run("walker reports what lacks one", func(t *testing.T) {
		doc := loadDoc(t, []byte(tinyDocument))
		got := undescribed(doc)
		want := []string{
			"GET /things/{id} parameter verbose",
			"GET /things/{id} response 404",
			"POST /things request body",
			"POST /things summary",
			"components.schemas.Bare",
			"components.schemas.Thing.properties.bare",
			"components.schemas.Thing.properties.name",
			"components.schemas.Thing.properties.parts.items.properties.label",
		}
		if !slices.Equal(got, want) {
			t.Errorf("undescribed:\n got  %q\n want %q", got, want)
		}
	})
}

// tinyDocument is a small document in which the elements that
// TestEveryOpenAPIElementDescribed expects to be reported lack a
// description and everything else has one.
const tinyDocument = `openapi: 3.0.3
info:
  title: tiny
  version: "1"
paths:
  /things/{id}:
    parameters:
      - name: id
        in: path
        required: true
        description: The thing's id.
        schema:
          $ref: "#/components/schemas/Id"
    get:
      summary: A thing
      description: Reads a thing.
      parameters:
        - name: verbose
          in: query
          schema:
            type: boolean
      responses:
        "200":
          description: The thing
          content:
            application/json:
              schema:
                $ref: "#/components/schemas/Thing"
        "404":
          description: ""
  /things:
    post:
      description: Creates a thing.
      requestBody:
        content:
          application/json:
            schema:
              $ref: "#/components/schemas/Thing"
      responses:
        "201":
          description: The new thing
components:
  schemas:
    Id:
      type: string
      description: An id.
    Bare:
      type: string
    Thing:
      type: object
      description: A thing.
      properties:
        id:
          $ref: "#/components/schemas/Id"
        bare:
          $ref: "#/components/schemas/Bare"
        name:
          type: string
        parts:
          type: array
          description: The thing's parts.
          items:
            type: object
            properties:
              label:
                type: string
`

// loadDoc loads and validates an OpenAPI document, failing the test on error.
func loadDoc(t *testing.T, data []byte) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("validate: %v", err)
	}
	return doc
}

// undescribed returns, sorted, the path of every element of doc that has no
// description: each operation's summary and description ("GET /p summary"),
// each inline parameter, request body and response of an operation
// ("GET /p parameter id", "POST /p request body", "GET /p response 200"), each
// parameter, request body, response and schema of the components
// ("components.schemas.Run"), and each schema property, recursively through
// inline items, allOf, oneOf, anyOf, not and additionalProperties schemas
// ("components.schemas.Run.properties.state"). An element given by a $ref to
// the components is checked once, at its component; a property that is such
// a $ref counts as described when the referenced schema is.
func undescribed(doc *openapi3.T) []string {
	w := walker{doc: doc}
	if doc.Paths != nil {
		w.paths(doc.Paths)
	}
	if c := doc.Components; c != nil {
		w.components(c)
	}
	sort.Strings(w.missing)
	return w.missing
}

// paths checks each path's parameters and operations.
func (w *walker) paths(paths *openapi3.Paths) {
	for path, item := range paths.Map() {
		for _, p := range item.Parameters {
			w.parameter(path+" parameter", p)
		}
		for method, op := range item.Operations() {
			w.operation(method+" "+path, op)
		}
	}
}

// components checks each component parameter, request body, response and
// schema, and what each holds.
func (w *walker) components(c *openapi3.Components) {
	for name, p := range c.Parameters {
		w.check("components.parameters."+name, p.Value != nil && p.Value.Description != "")
		if p.Value != nil {
			w.schema("components.parameters."+name+" schema", p.Value.Schema)
		}
	}
	for name, b := range c.RequestBodies {
		w.check("components.requestBodies."+name, b.Value != nil && b.Value.Description != "")
		if b.Value != nil {
			w.content("components.requestBodies."+name, b.Value.Content)
		}
	}
	for name, r := range c.Responses {
		w.check("components.responses."+name, r.Value != nil && r.Value.Description != nil && *r.Value.Description != "")
		if r.Value != nil {
			w.content("components.responses."+name, r.Value.Content)
		}
	}
	for name, s := range c.Schemas {
		w.check("components.schemas."+name, s.Value != nil && s.Value.Description != "")
		if s.Value != nil {
			w.members("components.schemas."+name, s.Value)
		}
	}
}

// walker collects the paths of undescribed elements of doc.
type walker struct {
	doc     *openapi3.T
	missing []string
}

// check records path as missing unless described.
func (w *walker) check(path string, described bool) {
	if !described {
		w.missing = append(w.missing, path)
	}
}

// isComponent tells whether ref points into the document's components,
// where the element is checked on its own.
func isComponent(ref string) bool {
	return strings.HasPrefix(ref, "#/components/")
}

// operation checks an operation's summary, description, inline parameters,
// request body and responses; at is "METHOD /path".
func (w *walker) operation(at string, op *openapi3.Operation) {
	w.check(at+" summary", op.Summary != "")
	w.check(at+" description", op.Description != "")
	for _, p := range op.Parameters {
		w.parameter(at+" parameter", p)
	}
	if b := op.RequestBody; b != nil && !isComponent(b.Ref) && b.Value != nil {
		w.check(at+" request body", b.Value.Description != "")
		w.content(at+" request body", b.Value.Content)
	}
	if op.Responses != nil {
		for status, r := range op.Responses.Map() {
			if isComponent(r.Ref) || r.Value == nil {
				continue
			}
			where := at + " response " + status
			w.check(where, r.Value.Description != nil && *r.Value.Description != "")
			w.content(where, r.Value.Content)
		}
	}
}

// parameter checks an inline parameter and its schema's properties; a
// parameter that refers to the components is checked there.
func (w *walker) parameter(at string, p *openapi3.ParameterRef) {
	if p == nil || isComponent(p.Ref) || p.Value == nil {
		return
	}
	where := at + " " + p.Value.Name
	w.check(where, p.Value.Description != "")
	w.schema(where+" schema", p.Value.Schema)
}

// content walks the properties of each media type's inline schema.
func (w *walker) content(at string, c openapi3.Content) {
	for mt, m := range c {
		if m != nil {
			w.schema(at+" "+mt+" schema", m.Schema)
		}
	}
}

// schema walks the members of an inline schema without requiring a
// description of the schema itself (its parameter, body, response, property
// or component carries that); a $ref is left to its component.
func (w *walker) schema(at string, s *openapi3.SchemaRef) {
	if s == nil || s.Value == nil || s.Ref != "" {
		return
	}
	w.members(at, s.Value)
}

// members checks each property of s and walks on through the inline schemas
// below it: properties, items, allOf, oneOf, anyOf, not and
// additionalProperties.
func (w *walker) members(at string, s *openapi3.Schema) {
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := s.Properties[name]
		where := at + ".properties." + name
		w.check(where, w.propertyDescribed(p))
		w.schema(where, p)
	}
	w.schema(at+".items", s.Items)
	for kind, list := range map[string]openapi3.SchemaRefs{"allOf": s.AllOf, "oneOf": s.OneOf, "anyOf": s.AnyOf} {
		for i, m := range list {
			w.schema(fmt.Sprintf("%s.%s[%d]", at, kind, i), m)
		}
	}
	w.schema(at+".not", s.Not)
	w.schema(at+".additionalProperties", s.AdditionalProperties.Schema)
}

// propertyDescribed tells whether a property has a description of its own
// or, when it is a $ref, whether the referenced schema has one.
func (w *walker) propertyDescribed(p *openapi3.SchemaRef) bool {
	if p == nil {
		return false
	}
	if name, ok := strings.CutPrefix(p.Ref, "#/components/schemas/"); ok && w.doc.Components != nil {
		if c := w.doc.Components.Schemas[name]; c != nil && c.Value != nil {
			return c.Value.Description != ""
		}
	}
	return p.Value != nil && p.Value.Description != ""
}
