package clamd_test

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"bothy.example.com/bothy/internal/files/clamd"
	"bothy.example.com/bothy/internal/files/clamd/clamdtest"
)

// A scan of an upload against the fake daemon, as the server's tests run it;
// in production Addr is files.clamd_addr.
func ExampleClient_Scan() {
	srv := clamdtest.NewServer()
	defer srv.Close()

	c := &clamd.Client{Addr: srv.Addr(), Timeout: 10 * time.Second, MaxSize: 25 << 20}
	for _, body := range [][]byte{[]byte("Notes from Robin"), clamdtest.EICAR()} {
		v, err := c.Scan(context.Background(), bytes.NewReader(body))
		if err != nil {
			fmt.Println("not scanned:", err)
			continue
		}
		if v.Status == clamd.Infected {
			fmt.Println(v.Status, v.Signature)
		} else {
			fmt.Println(v.Status)
		}
	}
	// Output:
	// clean
	// infected Win.Test.EICAR_HDB-1
}
