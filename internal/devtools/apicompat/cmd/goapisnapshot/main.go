// Command goapisnapshot stores the exported API of a Go module's library
// packages as a snapshot that the compatibility gate compares with (make
// sdk-api-snapshot, at each release):
//
//	goapisnapshot -dir sdk -o sdk/api/1.1.0 ./...
package main

import (
	"flag"
	"fmt"
	"os"

	"bothy.example.com/bothy/internal/devtools/apicompat"
)

func main() {
	dir := flag.String("dir", ".", "the module's folder")
	out := flag.String("o", "", "the snapshot's folder (required)")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: goapisnapshot -dir MODULE -o FOLDER PATTERN...")
		os.Exit(2)
	}
	api, err := apicompat.LoadGoAPI(*dir, flag.Args()...)
	if err == nil {
		err = api.Write(*out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "goapisnapshot:", err)
		os.Exit(1)
	}
	fmt.Printf("goapisnapshot: %d packages in %s\n", len(api), *out)
}
