// Command fetch-testdata fetches every npm package pinned in internal/npmdata into .cache/npm/ at
// the module root, and installs those tests run with their dependencies into .cache/npm-install/,
// as tests would on first use. A package already cached is not fetched again.
// scripts/fetch-testdata.sh runs it.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/parleyhq/parley/internal/npmdata"
)

func main() {
	for _, spec := range npmdata.Pinned() {
		if _, err := npmdata.Dir(spec); err != nil {
			fmt.Fprintf(os.Stderr, "fetch-testdata: %v\n", err)
			os.Exit(1)
		}
	}
	for _, spec := range npmdata.Installed() {
		if _, err := npmdata.InstallDir(spec); err != nil {
			fmt.Fprintf(os.Stderr, "fetch-testdata: %v\n", err)
			os.Exit(1)
		}
	}
	fmt.Fprintf(os.Stderr, "fetch-testdata: %s in .cache/npm, %s in .cache/npm-install\n",
		strings.Join(npmdata.Pinned(), " "), strings.Join(npmdata.Installed(), " "))
}
