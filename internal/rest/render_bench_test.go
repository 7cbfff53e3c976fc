package rest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"

	"bothy.example.com/bothy/graph/generated"
)

// BenchmarkRenderContext renders a run context of 200 elements of 400
// bytes, as the executor writes it, in the REST shape: the shim's own cost
// on the context read, without I/O (docs/performance.md).
func BenchmarkRenderContext(b *testing.B) {
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	sh := &Shim{schema: schema, types: typeTable(schema)}
	content := strings.Repeat("Sam wrote: the \"printer\" on floor 2 is out of toner again. ", 7)[:400]
	elem := func(i int) string {
		return fmt.Sprintf(`{"messageId":"0193a5b0-7c1e-7000-8000-%012d","threadSeq":%d,"createdAt":"2026-11-30T09:00:00.000000Z",`+
			`"channelId":"0193a5b0-7c1e-7000-8000-000000000001","author":{"id":"0193a5b0-7c1e-7000-8000-000000000002","kind":"HUMAN","handle":"sam","displayName":"Sam"},`+
			`"role":"OTHER","origin":"HUMAN","kind":"TEXT","contentMd":%q,"truncated":false,"attachments":[],"replyToMessageId":null,"trust":"AUTHORIZED","alreadyDelivered":null}`,
			i, i, content)
	}
	elems := make([]string, 200)
	for i := range elems {
		elems[i] = elem(i + 1)
	}
	answer := []byte(`{"runId":"0193a5b0-7c1e-7000-8000-000000000003","contextFloorSeq":0,"triggerMessage":` + elem(201) +
		`,"threadContext":[` + strings.Join(elems, ",") + `],"channelContext":null,"truncatedBeforeSeq":null,` +
		`"trustSummary":{"lowest":"AUTHORIZED","counts":[{"trust":"AUTHORIZED","count":201}]},"followUps":[]}`)
	typ := &ast.Type{NamedType: "RunContext", NonNull: true}
	out, err := sh.renderJSON(nil, &scanner{in: answer}, typ, nil)
	if err != nil || len(out) < len(answer)/2 {
		b.Fatalf("render: %d bytes, %v", len(out), err)
	}
	b.SetBytes(int64(len(answer)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if out, err = sh.renderJSON(out[:0], &scanner{in: answer}, typ, nil); err != nil {
			b.Fatal(err)
		}
	}
}
