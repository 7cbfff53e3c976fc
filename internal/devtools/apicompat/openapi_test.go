package apicompat

import (
	"slices"
	"strings"
	"testing"
)

const openapiBase = `openapi: 3.0.3
info: {title: t, version: 1.0.0}
paths:
  /runs/{id}:
    get:
      operationId: getRun
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses:
        "200":
          description: the run
          content:
            application/json:
              schema:
                type: object
                required: [id, state]
                properties:
                  id: {type: string}
                  state: {type: string}
  /runs:
    get:
      operationId: listRuns
      responses:
        "200": {description: the runs}
`

// openapiShared has a response schema that two operations share, as Bothy's
// document does (Run is read alone and in a list).
const openapiShared = `openapi: 3.0.3
info: {title: t, version: 1.0.0}
paths:
  /runs/{id}:
    get:
      operationId: getRun
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses:
        "200":
          description: the run
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Run"}
  /runs:
    get:
      operationId: listRuns
      responses:
        "200":
          description: the runs
          content:
            application/json:
              schema:
                type: object
                required: [items]
                properties:
                  items:
                    type: array
                    items: {$ref: "#/components/schemas/Run"}
                  next: {$ref: "#/components/schemas/Cursor"}
components:
  schemas:
    Run:
      type: object
      required: [id]
      properties:
        id: {type: string}
        note: {type: string, description: optional, written by Alex or Sam}
        started_at: {$ref: "#/components/schemas/Timestamp"}
        ended_at: {$ref: "#/components/schemas/Timestamp"}
    Timestamp: {type: string, format: date-time}
    Cursor:
      type: object
      properties:
        after: {type: string}
`

func TestOpenAPIBreaks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, cur string
		want      []string // subjects of the breaks
	}{
		{"unchanged", openapiBase, nil},
		{"operation added", openapiBase + `  /health:
    get:
      operationId: health
      responses:
        "200": {description: ok}
`, nil},
		{"operation removed", strings.Split(openapiBase, "  /runs:\n")[0], []string{"GET /runs"}},
		{"response property removed", strings.Replace(openapiBase, "                  state: {type: string}\n", "", 1), []string{"GET /runs/{id}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			breaks, _, err := OpenAPIBreaks([]byte(openapiBase), []byte(tc.cur))
			if err != nil {
				t.Fatal(err)
			}
			subjects := map[string]bool{}
			for _, b := range breaks {
				if b.Face != "REST" || b.Detail == "" {
					t.Errorf("break %+v", b)
				}
				subjects[b.Subject] = true
			}
			if len(subjects) != len(tc.want) {
				t.Fatalf("breaks %v, want subjects %v", breaks, tc.want)
			}
			for _, s := range tc.want {
				if !subjects[s] {
					t.Fatalf("breaks %v, want subject %q", breaks, s)
				}
			}
		})
	}
}

// TestOpenAPIBreaksOptionalAndShared: removing an optional response
// property breaks a client that reads it, and a change in a shared schema
// is one break named after the schema, however many operations answer it.
func TestOpenAPIBreaksOptionalAndShared(t *testing.T) {
	t.Parallel()
	optionalBase := strings.Replace(openapiBase, "required: [id, state]", "required: [id]", 1)
	for _, tc := range []struct {
		name, base, cur string
		want            []string // the subjects of the breaks, in order
		details         []string // what the details name
	}{
		{"optional inline property removed", optionalBase,
			strings.Replace(optionalBase, "                  state: {type: string}\n", "", 1), []string{"GET /runs/{id}"}, nil},
		{"optional property of a shared schema removed", openapiShared,
			strings.Replace(openapiShared, "        note: {type: string, description: optional, written by Alex or Sam}\n", "", 1),
			[]string{"#/components/schemas/Run"}, []string{"note", "GET /runs, GET /runs/{id}"}},
		{"required property of a shared schema removed", openapiShared,
			strings.Replace(strings.Replace(openapiShared, "      required: [id]\n", "", 1), "        id: {type: string}\n", "", 1),
			[]string{"#/components/schemas/Run"}, nil},
		// The change is located at Timestamp, which the property names.
		{"property of a shared schema naming a schema removed", openapiShared,
			strings.Replace(openapiShared, "        started_at: {$ref: \"#/components/schemas/Timestamp\"}\n", "", 1),
			[]string{"#/components/schemas/Run"}, []string{"started_at", "GET /runs, GET /runs/{id}"}},
		// Both are located at Timestamp: still two changes.
		{"two properties of a shared schema naming one schema removed", openapiShared,
			strings.Replace(strings.Replace(openapiShared, "        started_at: {$ref: \"#/components/schemas/Timestamp\"}\n", "", 1),
				"        ended_at: {$ref: \"#/components/schemas/Timestamp\"}\n", "", 1),
			[]string{"#/components/schemas/Run"}, []string{"started_at", "ended_at"}},
		{"property of a schema one operation answers removed", openapiShared,
			strings.Replace(openapiShared, "        after: {type: string}\n", "", 1), []string{"#/components/schemas/Cursor"}, nil},
		// The property is the inline response's, not Cursor's, though its
		// schema is Cursor.
		{"property naming a schema removed", openapiShared,
			strings.Replace(openapiShared, "                  next: {$ref: \"#/components/schemas/Cursor\"}\n", "", 1), []string{"GET /runs"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			breaks, _, err := OpenAPIBreaks([]byte(tc.base), []byte(tc.cur))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, b := range breaks {
				got = append(got, b.Subject)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("breaks %v, want subjects %q", breaks, tc.want)
			}
			for _, d := range tc.details {
				if !strings.Contains(breaks[0].Detail, d) {
					t.Errorf("detail %q does not name %q", breaks[0].Detail, d)
				}
			}
		})
	}
}
