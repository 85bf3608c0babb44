// Package argodiff checks Parley's generated Argo CD gates with Argo CD's own diff code.
package argodiff
