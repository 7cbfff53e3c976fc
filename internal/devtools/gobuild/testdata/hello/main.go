// Command hello greets Sam: the program gobuild's test builds.
package main

import "fmt"

func main() { fmt.Println("Hello, Sam") }
