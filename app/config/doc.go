// Package config reads the configuration of `parley serve`: an HCL file, then environment variables
// that override it (so a Helm chart can inject secrets from Kubernetes Secrets without writing them to
// a file). Secrets are held in a type that never prints its value.
package config
