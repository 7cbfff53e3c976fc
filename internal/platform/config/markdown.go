package config

import (
	"fmt"
	"strings"
)

// Markdown renders docs/configuration.md from the registry. A test compares
// the checked-in file with this output, so the document cannot drift.
func Markdown() string {
	var b strings.Builder
	b.WriteString("# Configuration\n\n")
	b.WriteString("Generated from the key registry in `internal/platform/config` by `make generate`; do not edit by hand.\n\n")
	b.WriteString("Sources, later wins: the defaults below, a YAML file (`--config FILE`, nested or dotted keys), and the environment ")
	b.WriteString("(`BOTHY_` plus the key in upper case with `.` as `_`). An invalid value stops the server at start with a message that names the key.\n\n")
	b.WriteString("| key | type | default | minimum | environment | meaning |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, k := range registry {
		def := k.Default
		if def == "" {
			def = "(empty)"
		}
		min := k.Min
		if min == "" {
			min = "-"
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s | `%s` | %s |\n", k.Name, k.Type, def, min, EnvName(k.Name), k.Description)
	}
	return b.String()
}
