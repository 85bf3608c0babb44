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
