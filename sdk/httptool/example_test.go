package httptool_test

import (
	"fmt"
	"log"

	"bothy.example.com/bothy/sdk/httptool"
)

// Parse makes the tools of a tools file; a model backend offers them to the
// model, and the SDK runs the consequential ones behind its approval gate.
func ExampleParse() {
	tools, err := httptool.Parse([]byte(`
tools:
  - name: file_ticket
    description: File a ticket in the team's tracker.
    parameters: {type: object, properties: {title: {type: string}}, required: [title]}
    consequential: true
    url: https://tracker.example.com/hooks/tickets
`), httptool.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tools {
		fmt.Println(t.Name, t.Consequential)
	}
	// Output: file_ticket true
}
