// Command ship builds what Parley ships, from the commit checked out and without a container
// daemon:
//
//	ship image    the container image the Helm chart runs, into an OCI layout (and optionally a
//	              docker-loadable tarball), pushed to a registry with --push
//	ship release  parley for linux and darwin on amd64 and arm64, SHA-256 checksums and a
//	              CycloneDX SBOM per binary
//
// Both build the binary the same way (build.go). The image is assembled with go-containerregistry
// from nothing: no base image to pull, so it builds offline, and every byte comes from the commit
// (file times and the created date are the commit's time), so two builds of one commit give the
// same digest. ship is its own Go module, as the harnesses under tests/ are, so that
// go-containerregistry and docker's credential helpers stay out of the parley module's
// dependencies; run it as scripts/image and scripts/release do.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: ship image [flags]     build the container image (ship image -h for flags)
       ship release [flags]   build the release binaries, checksums and SBOMs (ship release -h)
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "image":
		err = runImage(ctx, args[1:], stdout, stderr)
	case "release":
		err = runRelease(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "ship: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if err == nil {
		return 0
	}
	if err == errUsage {
		return 2
	}
	fmt.Fprintf(stderr, "ship: %v\n", err)
	return 1
}
