package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	t.Parallel()
	stream := strings.Join([]string{
		`{"Action":"run","Package":"p/a","Test":"TestX"}`,
		`{"Action":"pass","Package":"p/a","Test":"TestX","Elapsed":1.5}`,
		`{"Action":"pass","Package":"p/a","Test":"TestX/sub","Elapsed":1.4}`,
		`{"Action":"fail","Package":"p/a","Test":"TestY","Elapsed":3}`,
		`{"Action":"skip","Package":"p/b","Test":"TestZ","Elapsed":0}`,
		`{"Action":"output","Package":"p/a","Output":"ok"}`,
		`# p/c [build failed]`,
		`{"Action":"fail","Package":"p/a","Elapsed":4.5}`,
		`{"Action":"pass","Package":"p/b","Elapsed":9}`,
		`{"Action":"skip","Package":"p/d","Elapsed":0}`,
		`{not json`,
	}, "\n")
	got, err := Read(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	want := Run{
		Packages: []Timing{{"p/b", 9}, {"p/a", 4.5}, {"p/d", 0}},
		Tests:    []Timing{{"p/a TestY", 3}, {"p/a TestX", 1.5}, {"p/b TestZ", 0}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Read:\n got %+v\nwant %+v", got, want)
	}
}

func TestPrint(t *testing.T) {
	t.Parallel()
	r := Run{
		Packages: []Timing{{"p/b", 9}, {"p/a", 4.5}, {"p/d", 0}},
		Tests:    []Timing{{"p/a TestY", 3}},
	}
	var b bytes.Buffer
	Print(&b, r, 95*time.Second, 2)
	want := "make test: 1m35s wall time, 3 packages, 1 top-level tests\n" +
		"slowest packages:\n      9.0s  p/b\n      4.5s  p/a\n" +
		"slowest tests:\n      3.0s  p/a TestY\n"
	if b.String() != want {
		t.Fatalf("Print:\n%s\nwant\n%s", b.String(), want)
	}
}
