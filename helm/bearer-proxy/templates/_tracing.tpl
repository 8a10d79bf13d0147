{{/*
bearer-proxy.tracingEnv — OpenTelemetry traces as the standard OTEL_* environment (bearer-proxy
reads nothing else for them; docs/operations.md "Traces"). Takes a dict:
  tracing     the `tracing` values (enabled, endpoint, protocol, serviceName, sampler,
              samplerArg, resourceAttributes, headersSecret.name/.key); nothing is rendered
              unless `enabled`
  deployment  the Deployment's name, recorded as k8s.deployment.name (optional: a sidecar's
              pod belongs to the app)
Renders env entries (a YAML list at column 0). The pod's name and namespace come from the
downward API and are referenced as $(VAR), so they must be defined before
OTEL_RESOURCE_ATTRIBUTES; the names are the ones the OpenTelemetry operator injects. The
collector headers (often an API key) come from a Secret, never a value.
*/}}
{{- define "bearer-proxy.tracingEnv" -}}
{{- $t := .tracing | default dict -}}
{{- if $t.enabled -}}
- name: OTEL_TRACES_EXPORTER
  value: otlp
{{- with $t.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ default "http/protobuf" $t.protocol | quote }}
{{- with $t.headersSecret }}
{{- if .name }}
- name: OTEL_EXPORTER_OTLP_HEADERS
  valueFrom:
    secretKeyRef:
      name: {{ .name }}
      key: {{ required "tracing.headersSecret.key is required with tracing.headersSecret.name" .key }}
{{- end }}
{{- end }}
{{- with $t.serviceName }}
- name: OTEL_SERVICE_NAME
  value: {{ . | quote }}
{{- end }}
{{- with $t.sampler }}
- name: OTEL_TRACES_SAMPLER
  value: {{ . | quote }}
{{- end }}
{{- /* toString: `--set tracing.samplerArg=0` makes a number, and 0 is a ratio, not "unset". */}}
{{- if and (hasKey $t "samplerArg") (ne (toString $t.samplerArg) "") }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ toString $t.samplerArg | quote }}
{{- end }}
- name: OTEL_RESOURCE_ATTRIBUTES_POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: OTEL_RESOURCE_ATTRIBUTES_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- $attributes := list "k8s.namespace.name=$(OTEL_RESOURCE_ATTRIBUTES_NAMESPACE)" "k8s.pod.name=$(OTEL_RESOURCE_ATTRIBUTES_POD_NAME)" }}
{{- with .deployment }}
{{- $attributes = append $attributes (printf "k8s.deployment.name=%s" .) }}
{{- end }}
{{- /* Last: a key given here wins over the chart's (bearer-proxy keeps the last of a key). */}}
{{- with $t.resourceAttributes }}
{{- $attributes = append $attributes . }}
{{- end }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ join "," $attributes | quote }}
{{- end -}}
{{- end -}}

{{/*
The collector's port for the NetworkPolicy: tracing.endpoint's, else its scheme's (https 443,
http 80); empty when there is no endpoint (the default, localhost:4318, is not subject to a
NetworkPolicy).
*/}}
{{- define "bearer-proxy.tracingPort" -}}
{{- with .Values.tracing.endpoint -}}
{{- $hostport := regexReplaceAll "^[a-zA-Z][a-zA-Z0-9+.-]*://([^@/]*@)?([^/?#]*).*$" . "${2}" -}}
{{- $port := regexFind ":[0-9]+$" $hostport | trimPrefix ":" -}}
{{- if $port -}}{{ $port }}{{- else if hasPrefix "https:" (lower .) -}}443{{- else -}}80{{- end -}}
{{- end -}}
{{- end -}}
