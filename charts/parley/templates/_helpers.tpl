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
