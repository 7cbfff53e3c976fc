package extract_test

import (
	"context"
	"fmt"
	"strings"

	"bothy.example.com/bothy/internal/files/extract"
)

// Text of an HTML upload, with the media type as the sniffer reports it.
func ExampleText() {
	page := `<html><head><script>steal()</script></head><body><h1>Agenda</h1><p>Sam &amp; Alex</p></body></html>`
	res, err := extract.Text(context.Background(), "text/html; charset=utf-8",
		strings.NewReader(page), int64(len(page)), extract.Options{MaxBytes: 256 << 10})
	if err != nil {
		fmt.Println("retry later:", err)
		return
	}
	fmt.Println(res.Status, res.Truncated)
	fmt.Println(res.Text)
	// Output:
	// READY false
	// Agenda
	// Sam & Alex
}
