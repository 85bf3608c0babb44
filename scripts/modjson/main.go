// Command modjson reads the JSON that `go mod download -json` or `go mod edit -json` prints and
// prints one part of it, for scripts/real-controllers.sh: a fresh machine has no jq, and the
// script must run with only what the repository installs.
//
//	modjson dir       the downloaded module's directory (go mod download -json); exits 1 with the
//	                  download's error if there is none
//	modjson go        the go.mod's go version (go mod edit -json)
//	modjson replaces  one line per replace directive: old|oldVersion|new|newVersion
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

type module struct {
	Path, Version string
}

type doc struct {
	Dir, Error string // go mod download -json
	Go         string // go mod edit -json
	Replace    []struct{ Old, New module }
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: modjson dir|go|replaces < JSON")
		os.Exit(2)
	}
	var d doc
	if err := json.NewDecoder(os.Stdin).Decode(&d); err != nil {
		fmt.Fprintf(os.Stderr, "modjson: read JSON: %v\n", err)
		os.Exit(1)
	}
	switch os.Args[1] {
	case "dir":
		if d.Dir == "" {
			fmt.Fprintf(os.Stderr, "modjson: no directory: %s\n", d.Error)
			os.Exit(1)
		}
		fmt.Println(d.Dir)
	case "go":
		fmt.Println(d.Go)
	case "replaces":
		for _, r := range d.Replace {
			fmt.Printf("%s|%s|%s|%s\n", r.Old.Path, r.Old.Version, r.New.Path, r.New.Version)
		}
	default:
		fmt.Fprintf(os.Stderr, "modjson: unknown query %q\n", os.Args[1])
		os.Exit(2)
	}
}
