{{- define "parley.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "parley.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "parley.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- /* parley.postgres is "true" when the store is PostgreSQL (a Secret holds its URL). */ -}}
{{- define "parley.postgres" -}}
{{- if .Values.store.postgres.secret.name }}true{{ end -}}
{{- end -}}

{{- /* parley.pvc is "true" when the chart's PVC holds the SQLite store. */ -}}
{{- define "parley.pvc" -}}
{{- if and .Values.persistence.enabled (not (include "parley.postgres" .)) }}true{{ end -}}
{{- end -}}

{{- /* parley.pipelinesHCL is serve's firehose and pubsub blocks (docs/pipelines.md), from
pipelines.firehose and pipelines.pubsub; each stream's access key is mounted with the event
secrets, under /etc/parley/event-secrets/firehose/<name>. */ -}}
{{- define "parley.pipelinesHCL" -}}
{{- range $name, $f := .Values.pipelines.firehose }}
{{- if not (or (hasKey $.Values.gitops.clusters $name) (hasKey $.Values.gitops.awsAccounts $name)) }}{{ fail (printf "pipelines.firehose %q: add it to gitops.clusters or gitops.awsAccounts with its repository" $name) }}{{ end }}
{{- if not (and $f.accessKeySecret $f.accessKeySecret.name) }}{{ fail (printf "pipelines.firehose %q: accessKeySecret.name is required (the Secret holding the stream's access key)" $name) }}{{ end }}
firehose {{ $name | quote }} {
  access_key_file = "/etc/parley/event-secrets/firehose/{{ $name }}"
}
{{- end }}
{{- range $name, $p := .Values.pipelines.pubsub }}
{{- if not (hasKey $.Values.gitops.clusters $name) }}{{ fail (printf "pipelines.pubsub %q: add it to gitops.clusters with its repository" $name) }}{{ end }}
pubsub {{ $name | quote }} {
  audience        = {{ required (printf "pipelines.pubsub %q: audience is required" $name) $p.audience | quote }}
  service_account = {{ required (printf "pipelines.pubsub %q: serviceAccount is required" $name) $p.serviceAccount | quote }}
}
{{- end }}
{{- end -}}

{{- /* parley.pipelines is "true" when a firehose or pubsub endpoint is configured. */ -}}
{{- define "parley.pipelines" -}}
{{- if or .Values.pipelines.firehose .Values.pipelines.pubsub }}true{{ end -}}
{{- end -}}

{{- /*
parley.mebibytes is a Kubernetes memory quantity (512Mi, 2Gi, 1G, 2147483648) in MiB, as a float;
a value that is not one stops the render naming it.
*/ -}}
{{- define "parley.mebibytes" -}}
{{- $q := toString . -}}
{{- $n := regexFind "^[0-9]+(\\.[0-9]+)?" $q -}}
{{- $unit := trimPrefix $n $q -}}
{{- $per := dict "" (divf 1 1048576) "Ki" (divf 1 1024) "Mi" 1 "Gi" 1024 "Ti" 1048576 "Pi" 1073741824 "Ei" 1099511627776 "k" (divf 1000 1048576) "M" (divf 1000000 1048576) "G" (divf 1000000000 1048576) "T" (divf 1000000000000 1048576) "P" (divf 1000000000000000 1048576) "E" (divf 1000000000000000000 1048576) -}}
{{- if or (not $n) (not (hasKey $per $unit)) -}}
{{- fail (printf "resources.limits.memory %q: not a Kubernetes memory quantity (such as 1536Mi or 2Gi)" $q) -}}
{{- end -}}
{{- mulf (float64 $n) (get $per $unit) -}}
{{- end -}}

{{- /*
parley.checkMemory stops the render when the memory limit cannot hold what the render budgets let
parley serve use: each of budgets.renderParallel worker processes may take budgets.renderMemory MiB
for its chart or kustomize build beyond its own start (the binary's runtime and state, up to 130
MiB, docs/security.md), and the server itself needs room beside them (256 MiB, twice its memory
request by default). Below that, the first large chart rendered gets the pod OOM-killed instead of
being named as over its budget.
*/ -}}
{{- define "parley.checkMemory" -}}
{{- with .Values.resources.limits }}{{ with .memory }}
{{- $limit := include "parley.mebibytes" . | float64 -}}
{{- $b := $.Values.budgets -}}
{{- $workers := mulf (addf (float64 $b.renderMemory) 130) (float64 $b.renderParallel) -}}
{{- $need := addf $workers 256 -}}
{{- if lt $limit $need -}}
{{- fail (printf "resources.limits.memory %s (%.0f MiB) cannot hold the render budgets: (budgets.renderMemory %v MiB + 130 MiB per worker) x budgets.renderParallel %v = %.0f MiB, plus 256 MiB for the server = %.0f MiB. Raise the limit to at least %.0fMi, or lower budgets.renderMemory or budgets.renderParallel" (toString .) $limit $b.renderMemory $b.renderParallel $workers $need (ceil $need)) -}}
{{- end -}}
{{- end }}{{ end -}}
{{- end -}}
