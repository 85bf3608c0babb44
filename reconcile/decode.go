package reconcile

import (
	"fmt"

	"github.com/parleyhq/parley/reconcile/events"
)

// Sources lists the event sources Decode reads, in the order documented in docs/events.md.
func Sources() []string {
	return []string{events.SourceK8sAudit, events.SourceFlux, events.SourceArgoCD, events.SourceCloudTrail}
}

// Decode decodes one stored event body from source. CloudTrail calls are mapped to the Terraform
// attributes they change as the snapshot's .tf files declare them, so it needs the files.
func Decode(source string, body []byte, files map[string][]byte) (events.Batch, error) {
	switch source {
	case events.SourceK8sAudit:
		return events.DecodeK8sAudit(body)
	case events.SourceFlux:
		return events.DecodeFlux(body)
	case events.SourceArgoCD:
		return events.DecodeArgoCD(body)
	case events.SourceCloudTrail:
		ix, err := events.TFIndexFromFiles(files)
		if err != nil {
			return events.Batch{}, err
		}
		return events.DecodeCloudTrail(body, ix)
	}
	return events.Batch{}, fmt.Errorf("unknown event source %q (want one of %v)", source, Sources())
}
