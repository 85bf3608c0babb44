// Package chart checks the Helm chart in charts/parley with Helm's own Go library: lint it, render it
// with typical and minimal values, and assert what a cluster operator relies on. It is its own module
// so that Helm's large dependency tree stays out of the parley binary's module.
package chart
