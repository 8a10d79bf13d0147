{{/*
Chart name, truncated to the 63 characters Kubernetes allows in names and label values.
*/}}
{{- define "bearer-proxy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Full resource name: release name + chart name, unless the release name already contains it.
*/}}
{{- define "bearer-proxy.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Chart label value: name-version.
*/}}
{{- define "bearer-proxy.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels that select this release's pods. Never change them: Deployment selectors are immutable.
*/}}
{{- define "bearer-proxy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "bearer-proxy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
Common labels on every object.
*/}}
{{- define "bearer-proxy.labels" -}}
helm.sh/chart: {{ include "bearer-proxy.chart" . }}
{{ include "bearer-proxy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: gateway
app.kubernetes.io/part-of: bearer-proxy
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
ServiceAccount name.
*/}}
{{- define "bearer-proxy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "bearer-proxy.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
Image reference: repository@digest when a digest is given, else repository:tag (tag defaults to
the chart's appVersion).
*/}}
{{- define "bearer-proxy.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
Name of the ConfigMap holding config.yaml.
*/}}
{{- define "bearer-proxy.configMapName" -}}
{{- default (include "bearer-proxy.fullname" .) .Values.existingConfigMap -}}
{{- end -}}

{{/*
Where the files of callers.* are mounted. Fixed paths: the chart writes them into the config's
`callers` itself (bearer-proxy.callers), so values never repeat them.
*/}}
{{- define "bearer-proxy.callersMountPath" -}}/var/run/secrets/bearer-proxy-callers{{- end -}}
{{- define "bearer-proxy.callersUsersFile" -}}{{ include "bearer-proxy.callersMountPath" . }}/htpasswd{{- end -}}
{{- define "bearer-proxy.jwksMountPath" -}}/etc/bearer-proxy-jwks{{- end -}}
{{- define "bearer-proxy.jwksConfigMapFile" -}}{{ include "bearer-proxy.jwksMountPath" . }}/jwks.json{{- end -}}
{{- define "bearer-proxy.clusterCAMountPath" -}}/var/run/secrets/bearer-proxy-cluster-ca{{- end -}}
{{- define "bearer-proxy.clusterCAFile" -}}{{ include "bearer-proxy.clusterCAMountPath" . }}/ca.crt{{- end -}}
{{- define "bearer-proxy.apiTokenMountPath" -}}/var/run/secrets/bearer-proxy-api-token{{- end -}}

{{/*
bearer-proxy.jwksFromApiServer: "true" when callers.kubernetes.jwksUri is the API server's, which
serves its keys only to authenticated service accounts: rbac.issuerDiscovery says so, or the URL's
host is the API server's in-cluster name (kubernetes, kubernetes.default,
kubernetes.default.svc[.<cluster domain>]). Empty otherwise.
*/}}
{{- define "bearer-proxy.jwksFromApiServer" -}}
{{- $k := .Values.callers.kubernetes -}}
{{- if and $k.issuer $k.jwksUri (or .Values.rbac.issuerDiscovery (regexMatch "^https://kubernetes(\\.default(\\.svc(\\.[^/:?#]+)?)?)?(:[0-9]+)?([/?#]|$)" $k.jwksUri)) -}}
true
{{- end -}}
{{- end -}}

{{/*
bearer-proxy.jwksTokenFile: the config's callers.kubernetes.jwksTokenFile. The value of that name
when set (a file you mount); else, for the API server's JWKS, the pod's own service-account token:
the automounted one when serviceAccount.automountServiceAccountToken is on, else the chart's
projected `api-token` volume (bearer-proxy.apiTokenVolume). Empty: the fetch is anonymous.
*/}}
{{- define "bearer-proxy.jwksTokenFile" -}}
{{- $k := .Values.callers.kubernetes -}}
{{- if $k.jwksTokenFile -}}
{{- $k.jwksTokenFile -}}
{{- else if include "bearer-proxy.jwksFromApiServer" . -}}
{{- if .Values.serviceAccount.automountServiceAccountToken -}}
/var/run/secrets/kubernetes.io/serviceaccount/token
{{- else -}}
{{ include "bearer-proxy.apiTokenMountPath" . }}/token
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
bearer-proxy.apiTokenVolume: "true" when the chart mounts the projected `api-token` volume (the
API server's JWKS, no file of yours, no automounted token).
*/}}
{{- define "bearer-proxy.apiTokenVolume" -}}
{{- if and (include "bearer-proxy.jwksFromApiServer" .) (not .Values.callers.kubernetes.jwksTokenFile) (not .Values.serviceAccount.automountServiceAccountToken) -}}
true
{{- end -}}
{{- end -}}

{{/*
terminationGracePeriodSeconds: preStop sleep + drain delay + in-flight timeout + margin, so the
kubelet's SIGKILL never cuts the drain short.
*/}}
{{- define "bearer-proxy.terminationGracePeriodSeconds" -}}
{{- $s := .Values.shutdown -}}
{{- add (int $s.preStopSleepSeconds) (int $s.drainDelaySeconds) (int $s.timeoutSeconds) (int $s.extraGraceSeconds) -}}
{{- end -}}

{{/*
Ports bearer-proxy connects to on Redis, comma-separated and deduplicated: redis.url's, each
clusterNodes URL's (default 6379), or each sentinel's (default 26379) plus sentinel.dataPort.
Parsed with a regex rather than urlParse because a URL may hold `${REDIS_PASSWORD}`, which Go's
URL parser rejects.
*/}}
{{- define "bearer-proxy.redisPorts" -}}
{{- $r := .Values.redis -}}
{{- $ports := list -}}
{{- $urls := $r.clusterNodes | default list -}}
{{- if $r.url }}{{ $urls = append $urls $r.url }}{{ end -}}
{{- range $urls -}}
{{- $hostport := regexReplaceAll "^rediss?://([^@/]*@)?([^/?#]*).*$" . "${2}" -}}
{{- $ports = append $ports (default "6379" (regexFind ":[0-9]+$" $hostport | trimPrefix ":")) -}}
{{- end -}}
{{- if $r.sentinel.masterName -}}
{{- range $r.sentinel.nodes -}}
{{- $ports = append $ports (default "26379" (regexFind ":[0-9]+$" . | trimPrefix ":")) -}}
{{- end -}}
{{- $ports = append $ports (toString $r.sentinel.dataPort) -}}
{{- end -}}
{{- $ports | uniq | join "," -}}
{{- end -}}

{{/*
Fail early on values that would deploy a pod that cannot start.
*/}}
{{- define "bearer-proxy.validate" -}}
{{- if and (not .Values.existingConfigMap) (not .Values.existingSecret) (contains .Values.secretMountPath (toYaml .Values.config)) -}}
{{- fail (printf "config refers to files under %s: set existingSecret to the Secret that holds them" .Values.secretMountPath) -}}
{{- end -}}
{{- if .Values.redis.enabled -}}
{{- $forms := 0 -}}
{{- if .Values.redis.url }}{{ $forms = add1 $forms }}{{ end -}}
{{- if .Values.redis.clusterNodes }}{{ $forms = add1 $forms }}{{ end -}}
{{- if .Values.redis.sentinel.masterName }}{{ $forms = add1 $forms }}{{ end -}}
{{- if ne (int $forms) 1 -}}
{{- fail (printf "redis.enabled is true: set exactly one of redis.url (one Redis), redis.clusterNodes (Redis Cluster) and redis.sentinel.masterName (Sentinel); found %d" (int $forms)) -}}
{{- end -}}
{{- if and .Values.redis.sentinel.masterName (not .Values.redis.sentinel.nodes) -}}
{{- fail "redis.sentinel.masterName is set: list the sentinels in redis.sentinel.nodes (host:port)" -}}
{{- end -}}
{{- end -}}
{{- include "bearer-proxy.validateCallers" . -}}
{{- end -}}

{{/*
callers.* and upstreams' `allow`: what the schema cannot relate across values. The config's own
rules (a `user` the htpasswd file defines, a CIDR that parses) are bearer-proxy's to check.
*/}}
{{- define "bearer-proxy.validateCallers" -}}
{{- $k := .Values.callers.kubernetes -}}
{{- if and (not .Values.existingConfigMap) (hasKey (default dict .Values.config) "callers") -}}
{{- fail "config.callers is rendered by the chart: set callers.basic.* and callers.kubernetes.* instead" -}}
{{- end -}}
{{- if $k.issuer -}}
{{- $sources := 0 -}}
{{- if $k.jwksUri }}{{ $sources = add1 $sources }}{{ end -}}
{{- if $k.jwksFile }}{{ $sources = add1 $sources }}{{ end -}}
{{- if $k.jwksConfigMap.name }}{{ $sources = add1 $sources }}{{ end -}}
{{- if ne (int $sources) 1 -}}
{{- fail (printf "callers.kubernetes.issuer is set: set exactly one of callers.kubernetes.jwksUri, callers.kubernetes.jwksFile and callers.kubernetes.jwksConfigMap.name; found %d" (int $sources)) -}}
{{- end -}}
{{- if and $k.clusterCA $k.caFile -}}
{{- fail "callers.kubernetes: set clusterCA or caFile, not both (clusterCA sets caFile to the cluster's root CA)" -}}
{{- end -}}
{{- if and (or $k.clusterCA $k.caFile) (not $k.jwksUri) -}}
{{- fail "callers.kubernetes.clusterCA and caFile check the certificate of jwksUri: set callers.kubernetes.jwksUri" -}}
{{- end -}}
{{- if and $k.jwksTokenFile (not $k.jwksUri) -}}
{{- fail "callers.kubernetes.jwksTokenFile authenticates the fetch of jwksUri: set callers.kubernetes.jwksUri" -}}
{{- end -}}
{{- else if or $k.jwksUri $k.jwksFile $k.jwksConfigMap.name $k.caFile $k.clusterCA $k.jwksTokenFile -}}
{{- fail "callers.kubernetes: set callers.kubernetes.issuer (the tokens' iss) to accept service-account tokens" -}}
{{- end -}}
{{- if and .Values.rbac.issuerDiscovery (not (and $k.issuer $k.jwksUri)) -}}
{{- fail "rbac.issuerDiscovery is for callers.kubernetes.jwksUri on the API server: set callers.kubernetes.issuer and jwksUri" -}}
{{- end -}}
{{- if not .Values.existingConfigMap -}}
{{- range $i, $u := (default dict .Values.config).upstreams -}}
{{- range $u.allow -}}
{{- if and (hasKey . "user") (not $.Values.callers.basic.existingSecret) -}}
{{- fail (printf "config.upstreams[%d] (%s) allows user %q: set callers.basic.existingSecret to the Secret with the htpasswd file" $i $u.name .user) -}}
{{- end -}}
{{- if and (or (hasKey . "serviceAccount") (hasKey . "namespace")) (not $.Values.callers.kubernetes.issuer) -}}
{{- fail (printf "config.upstreams[%d] (%s) allows service accounts: set callers.kubernetes.issuer and its JWKS" $i $u.name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
