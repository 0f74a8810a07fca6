{{/* The Job's and the claim's name: the release's, with the chart's unless it already says it. */}}
{{- define "loadproof.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "loadproof.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "loadproof.claimName" -}}
{{- .Values.results.persistentVolumeClaim.existingClaim | default (printf "%s-results" (include "loadproof.fullname" .)) -}}
{{- end -}}

{{/* The command line after `loadproof`: one `loadproof run` (tests/unit/deploy/test_helm_chart.py parses it). */}}
{{- define "loadproof.args" -}}
- run
- {{ required "scenario is required" .Values.scenario | quote }}
- --url
- {{ required "target.url is required" .Values.target.url | quote }}
{{- with .Values.target.model }}
- --model
- {{ . | quote }}
{{- end }}
{{- if .Values.target.apiKeySecret.name }}
- --api-key-env
- LOADPROOF_API_KEY
{{- end }}
- --out
- {{ printf "%s/%s" .Values.results.mountPath (include "loadproof.fullname" .) | quote }}
{{- if .Values.metrics.enabled }}
- --metrics-port
- {{ .Values.metrics.port | quote }}
- --metrics-host
- "0.0.0.0"
- --metrics-linger-s
- {{ .Values.metrics.lingerSeconds | quote }}
{{- end }}
{{- range .Values.args }}
- {{ . | quote }}
{{- end }}
{{- end -}}
