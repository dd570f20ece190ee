{{/* Names and labels shared by the templates. */}}

{{- define "gantry.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gantry.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "gantry.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "gantry.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gantry.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "gantry.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "gantry.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: ingress or runner. */}}
{{- define "gantry.selector" -}}
app.kubernetes.io/name: {{ include "gantry.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The environment every gantry pod reads: the chart's Secret, then the
     operator's own (its keys win). */}}
{{- define "gantry.envFrom" -}}
- secretRef:
    name: {{ include "gantry.fullname" . }}-env
{{- with .Values.existingSecret }}
- secretRef:
    name: {{ . }}
{{- end }}
{{- end -}}

{{/* Restarts pods when the configuration changes. */}}
{{- define "gantry.configChecksum" -}}
checksum/env: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end -}}

{{- define "gantry.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}
