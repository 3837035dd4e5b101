// Command serve runs the mock model API by hand: it writes its CA to the
// file named by -ca, prints its URL, and logs each request as a JSON line.
//
//	go run ./cmd/mosaic/internal/mockapi/serve -listen 127.0.0.1:8443 -name localhost -ca /tmp/mock-ca.pem
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"time"

	"mosaic/cmd/mosaic/internal/mockapi"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8443", "address to listen on")
	name := flag.String("name", "localhost", "the name in the server's certificate")
	ca := flag.String("ca", "mock-ca.pem", "where to write the CA certificate")
	flag.Parse()
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	s, err := mockapi.Start(l, *name, "127.0.0.1", "::1")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*ca, s.CAPEM, 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.URL)
	seen := 0
	for {
		time.Sleep(200 * time.Millisecond)
		reqs := s.Requests()
		for _, r := range reqs[seen:] {
			b, _ := json.Marshal(r)
			fmt.Println(string(b))
		}
		seen = len(reqs)
	}
}
