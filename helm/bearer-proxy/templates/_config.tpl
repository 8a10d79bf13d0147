{{/*
bearer-proxy.config: the config file bearer-proxy reads, as YAML.

It is `.Values.config` plus what the chart owns, so each number lives in one place:
  listen    0.0.0.0:<containerPorts.proxy>   (a gateway serves other pods)
  admin     0.0.0.0:<containerPorts.admin>   (the kubelet probes the pod IP)
  shutdown  drainDelay/timeout from shutdown.drainDelaySeconds/timeoutSeconds, which also
            size terminationGracePeriodSeconds
  tokenCache.redis  from redis.* when redis.enabled (url, clusterNodes or sentinel; the
                    sentinel's passwords as ${REDIS_PASSWORD} / ${REDIS_SENTINEL_PASSWORD})
  callers   from callers.*: the files the chart mounts (the htpasswd Secret, the JWKS
            ConfigMap, the cluster CA, the pod's API token for the API server's JWKS) at
            fixed paths, so a path is never typed twice
values.schema.json rejects those keys inside `config` (bearer-proxy.validate rejects
`config.callers`). Upstreams' `allow` lists pass through as written.
*/}}
{{- define "bearer-proxy.config" -}}
{{- $cfg := deepCopy (default dict .Values.config) -}}
{{- $_ := set $cfg "listen" (dict "host" "0.0.0.0" "port" (int .Values.containerPorts.proxy)) -}}
{{- $_ = set $cfg "admin" (dict "host" "0.0.0.0" "port" (int .Values.containerPorts.admin)) -}}
{{- $_ = set $cfg "shutdown" (dict "drainDelay" (printf "%ds" (int .Values.shutdown.drainDelaySeconds)) "timeout" (printf "%ds" (int .Values.shutdown.timeoutSeconds))) -}}
{{- if .Values.redis.enabled -}}
{{- $r := .Values.redis -}}
{{- $redis := dict -}}
{{- with $r.url }}{{ $_ = set $redis "url" . }}{{ end -}}
{{- with $r.clusterNodes }}{{ $_ = set $redis "clusterNodes" . }}{{ end -}}
{{- if $r.sentinel.masterName -}}
{{- $s := dict "masterName" $r.sentinel.masterName "nodes" $r.sentinel.nodes -}}
{{- with $r.sentinel.username }}{{ $_ = set $s "username" . }}{{ end -}}
{{- if $r.passwordSecret.name }}{{ $_ = set $s "password" "${REDIS_PASSWORD}" }}{{ end -}}
{{- with $r.sentinel.sentinelUsername }}{{ $_ = set $s "sentinelUsername" . }}{{ end -}}
{{- if $r.sentinel.sentinelPasswordSecret.name }}{{ $_ = set $s "sentinelPassword" "${REDIS_SENTINEL_PASSWORD}" }}{{ end -}}
{{- if $r.sentinel.tls }}{{ $_ = set $s "tls" true }}{{ end -}}
{{- $_ = set $redis "sentinel" $s -}}
{{- end -}}
{{- with .Values.redis.keyPrefix }}{{ $_ = set $redis "keyPrefix" . }}{{ end -}}
{{- with .Values.redis.lockTtl }}{{ $_ = set $redis "lockTtl" . }}{{ end -}}
{{- with .Values.redis.commandTimeout }}{{ $_ = set $redis "commandTimeout" . }}{{ end -}}
{{- if not (hasKey $cfg "tokenCache") -}}
{{- $_ = set $cfg "tokenCache" dict -}}
{{- end -}}
{{- $_ = set $cfg.tokenCache "redis" $redis -}}
{{- end -}}
{{- $callers := include "bearer-proxy.callers" . | fromYaml -}}
{{- if $callers }}{{ $_ = set $cfg "callers" $callers }}{{ end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
bearer-proxy.callers: the config's `callers` section from callers.* (empty when neither Basic
users nor service-account tokens are configured).
*/}}
{{- define "bearer-proxy.callers" -}}
{{- $c := .Values.callers -}}
{{- $out := dict -}}
{{- if $c.basic.existingSecret -}}
{{- $basic := dict "usersFile" (include "bearer-proxy.callersUsersFile" .) -}}
{{- if not (kindIs "invalid" $c.basic.maxConcurrentChecks) }}{{ $_ := set $basic "maxConcurrentChecks" (int $c.basic.maxConcurrentChecks) }}{{ end -}}
{{- if not (kindIs "invalid" $c.basic.maxQueuedChecks) }}{{ $_ := set $basic "maxQueuedChecks" (int $c.basic.maxQueuedChecks) }}{{ end -}}
{{- $_ := set $out "basic" $basic -}}
{{- end -}}
{{- $k := $c.kubernetes -}}
{{- if $k.issuer -}}
{{- $kube := dict "issuer" $k.issuer "audiences" $k.audiences -}}
{{- with $k.jwksUri }}{{ $_ := set $kube "jwksUri" . }}{{ end -}}
{{- with include "bearer-proxy.jwksTokenFile" . }}{{ $_ := set $kube "jwksTokenFile" . }}{{ end -}}
{{- if $k.clusterCA -}}
{{- $_ := set $kube "caFile" (include "bearer-proxy.clusterCAFile" .) -}}
{{- else if $k.caFile -}}
{{- $_ := set $kube "caFile" $k.caFile -}}
{{- end -}}
{{- if $k.jwksConfigMap.name -}}
{{- $_ := set $kube "jwksFile" (include "bearer-proxy.jwksConfigMapFile" .) -}}
{{- else if $k.jwksFile -}}
{{- $_ := set $kube "jwksFile" $k.jwksFile -}}
{{- end -}}
{{- $_ := set $out "kubernetes" $kube -}}
{{- end -}}
{{- if $out }}{{ toYaml $out }}{{ end -}}
{{- end -}}
