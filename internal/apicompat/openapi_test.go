package apicompat

import (
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
