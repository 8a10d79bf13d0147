{{/*
bearer-proxy.sidecar — bearer-proxy as a Kubernetes native sidecar (1.29+).

Renders ONE container, for a pod's `initContainers:` list. `restartPolicy: Always` makes it a
sidecar: it keeps running beside the app, and the kubelet starts the app's containers only once
its startupProbe (GET /startup, which passes after the first token is obtained) succeeds. On pod
termination sidecars are stopped after the app's containers have exited, so the app can use the
proxy to the end, and a Job's pod completes when its app container does.

The proxy listens on 127.0.0.1:<port> (loopback only: nothing outside the pod can borrow its
credentials); the admin listener binds 0.0.0.0:<adminPort> so the kubelet can probe it.
POST /quitquitquit is accepted from loopback only.

Usage (in your chart, with this chart as a dependency, `mode: sidecar` to deploy nothing else):

  spec:
    initContainers:
      {{- include "bearer-proxy.sidecar" (dict "baseUrl" "https://api.example.com" "secretName" "api-credentials") | nindent 6 }}
    containers:
      - name: app
        env:
          - name: API_URL
            value: http://127.0.0.1:8080
    volumes:
      {{- include "bearer-proxy.sidecarVolumes" (dict "secretName" "api-credentials") | nindent 6 }}

Parameters (a dict; pass the same dict to both templates):
  baseUrl             Upstream base URL -> BEARER_PROXY_BASE_URL. Required unless configMap.
  apiVersion          "default", "scripting-preview" or an X-Version value -> BEARER_PROXY_API_VERSION.
  tokenRequestFormat  "form" or "json" -> BEARER_PROXY_TOKEN_REQUEST_FORMAT.
  secretName          Secret with the credentials, mounted at /var/run/secrets/bearer-proxy.
  clientIdKey         Key of the client id in that Secret. Default "client-id".
  clientSecretKey     Key of the client secret in that Secret. Default "client-secret".
  clientId            The client id inline -> BEARER_PROXY_CLIENT_ID (instead of secretName's
                      client-id; workload identity needs no Secret at all).
  serviceAccountToken dict(audience, expirationSeconds): mount a projected service-account token
                      (audience: what the identity provider expects, e.g.
                      "api://AzureADTokenExchange"; expirationSeconds default 3600, min 600) at
                      /var/run/secrets/bearer-proxy-token/token and authenticate with it:
                      BEARER_PROXY_CLIENT_AUTH=client-assertion-file, no client secret
                      (docs/kubernetes-sidecar.md, workload identity federation). With
                      configMap, point clientAssertionFile at that path in the config.
  configMap           ConfigMap with key config.yaml, mounted at /etc/bearer-proxy and run with
                      --config instead of the upstream variables above (for several upstreams
                      or settings the variables lack). listen/admin still come from port and
                      adminPort: BEARER_PROXY_LISTEN/_ADMIN_LISTEN win over the file.
  name                Container name. Default "bearer-proxy".
  image               Image reference: the image built from the Dockerfile, pushed to your
                      registry (docs/docker.md). Default "registry.example.com/bearer-proxy:0.1.0".
  imagePullPolicy     Default "IfNotPresent".
  port                Proxy port on 127.0.0.1. Default 8080.
  adminPort           Admin port. Default 9901.
  logLevel            trace|debug|info|warn|error. Default "info".
  nodeOptions         NODE_OPTIONS of the container. Default "--max-semi-space-size=1
                      --v8-pool-size=1": a 1 MiB young generation and one V8 worker thread,
                      ~7 MiB less RSS idle and ~15 MiB less under load for a few % more CPU per
                      request (bench/PROFILE.md) - memory is reserved on every pod, a sidecar's
                      CPU is small. "" leaves the image's (--max-semi-space-size=8).
  mallocTuning        Default true: MALLOC_ARENA_MAX=2 and MALLOC_TRIM_THRESHOLD_=131072, so
                      glibc returns what start-up freed instead of keeping it per thread arena
                      (~3-7 MiB of RSS, bench/PROFILE.md). false leaves the image's
                      (MALLOC_ARENA_MAX=2 only).
  tracing             OpenTelemetry traces: a dict shaped like the chart's `tracing` values
                      (enabled, endpoint, protocol, serviceName, sampler, samplerArg,
                      resourceAttributes, headersSecret) -> the OTEL_* env; e.g. pass
                      (index .Values "bearer-proxy" "tracing"). Default: off.
  env                 Extra env entries (list of EnvVar).
  volumeMounts        Extra volume mounts (list), e.g. a CA bundle for BEARER_PROXY_CA_FILE.
  resources           Container resources. Default requests 50m CPU / 128Mi, limit 256Mi memory
                      (idle and peak RSS: docs/benchmark.md, "Memory and Node flags").
  readinessProbe      true adds a readinessProbe on /readyz. Default false: the pod's readiness
                      would then follow the upstream's token endpoint, taking the app out of its
                      Service whenever the upstream has an outage.
  startupFailureThreshold  Seconds (1s period) to wait for the first token. Default 120.
*/}}
{{- define "bearer-proxy.sidecar" -}}
{{- $p := . -}}
{{- $port := int (default 8080 $p.port) -}}
{{- $adminPort := int (default 9901 $p.adminPort) -}}
{{- $mountPath := "/var/run/secrets/bearer-proxy" -}}
{{- $tokenPath := "/var/run/secrets/bearer-proxy-token" -}}
{{- if and (not $p.configMap) (not $p.baseUrl) -}}
{{- fail "bearer-proxy.sidecar: set baseUrl (or configMap)" -}}
{{- end -}}
- name: {{ default "bearer-proxy" $p.name }}
  image: {{ default "registry.example.com/bearer-proxy:0.1.0" $p.image }}
  imagePullPolicy: {{ default "IfNotPresent" $p.imagePullPolicy }}
  restartPolicy: Always
  {{- if $p.configMap }}
  args: ["run", "--config", "/etc/bearer-proxy/config.yaml"]
  {{- else }}
  args: ["run"]
  {{- end }}
  env:
    {{- $nodeOptions := hasKey $p "nodeOptions" | ternary $p.nodeOptions "--max-semi-space-size=1 --v8-pool-size=1" }}
    {{- with $nodeOptions }}
    - name: NODE_OPTIONS
      value: {{ . | quote }}
    {{- end }}
    {{- if (hasKey $p "mallocTuning" | ternary $p.mallocTuning true) }}
    - name: MALLOC_ARENA_MAX
      value: "2"
    - name: MALLOC_TRIM_THRESHOLD_
      value: "131072"
    {{- end }}
    # Environment beats the config file: these hold in both modes.
    - name: BEARER_PROXY_LISTEN
      value: {{ printf "127.0.0.1:%d" $port | quote }}
    - name: BEARER_PROXY_ADMIN_LISTEN
      value: {{ printf "0.0.0.0:%d" $adminPort | quote }}
    {{- if not $p.configMap }}
    - name: BEARER_PROXY_BASE_URL
      value: {{ $p.baseUrl | quote }}
    {{- with $p.apiVersion }}
    - name: BEARER_PROXY_API_VERSION
      value: {{ . | quote }}
    {{- end }}
    {{- with $p.tokenRequestFormat }}
    - name: BEARER_PROXY_TOKEN_REQUEST_FORMAT
      value: {{ . | quote }}
    {{- end }}
    {{- if $p.clientId }}
    - name: BEARER_PROXY_CLIENT_ID
      value: {{ $p.clientId | quote }}
    {{- else if $p.secretName }}
    - name: BEARER_PROXY_CLIENT_ID_FILE
      value: {{ printf "%s/%s" $mountPath (default "client-id" $p.clientIdKey) | quote }}
    {{- end }}
    {{- if $p.serviceAccountToken }}
    - name: BEARER_PROXY_CLIENT_AUTH
      value: "client-assertion-file"
    - name: BEARER_PROXY_CLIENT_ASSERTION_FILE
      value: {{ printf "%s/token" $tokenPath | quote }}
    {{- else if $p.secretName }}
    - name: BEARER_PROXY_CLIENT_SECRET_FILE
      value: {{ printf "%s/%s" $mountPath (default "client-secret" $p.clientSecretKey) | quote }}
    {{- end }}
    - name: BEARER_PROXY_LOG_LEVEL
      value: {{ default "info" $p.logLevel | quote }}
    {{- end }}
    {{- with include "bearer-proxy.tracingEnv" (dict "tracing" $p.tracing) }}
    {{- . | nindent 4 }}
    {{- end }}
    {{- with $p.env }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: bp-admin
      containerPort: {{ $adminPort }}
      protocol: TCP
  startupProbe:
    httpGet:
      path: /startup
      port: {{ $adminPort }}
    periodSeconds: 1
    timeoutSeconds: 2
    failureThreshold: {{ int (default 120 $p.startupFailureThreshold) }}
  livenessProbe:
    httpGet:
      path: /livez
      port: {{ $adminPort }}
    periodSeconds: 10
    timeoutSeconds: 2
    failureThreshold: 3
  {{- if $p.readinessProbe }}
  readinessProbe:
    httpGet:
      path: /readyz
      port: {{ $adminPort }}
    periodSeconds: 5
    timeoutSeconds: 2
    failureThreshold: 2
  {{- end }}
  resources:
    {{- if $p.resources }}
    {{- toYaml $p.resources | nindent 4 }}
    {{- else }}
    requests:
      cpu: 50m
      memory: 128Mi
    limits:
      memory: 256Mi
    {{- end }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    privileged: false
    capabilities:
      drop: ["ALL"]
    seccompProfile:
      type: RuntimeDefault
  volumeMounts:
    - name: bearer-proxy-tmp
      mountPath: /tmp
    {{- if $p.secretName }}
    - name: bearer-proxy-credentials
      mountPath: {{ $mountPath }}
      readOnly: true
    {{- end }}
    {{- if $p.configMap }}
    - name: bearer-proxy-config
      mountPath: /etc/bearer-proxy
      readOnly: true
    {{- end }}
    {{- if $p.serviceAccountToken }}
    - name: bearer-proxy-token
      mountPath: {{ $tokenPath }}
      readOnly: true
    {{- end }}
    {{- with $p.volumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/*
bearer-proxy.sidecarVolumes — the pod volumes bearer-proxy.sidecar mounts, for `volumes:`.
Takes the same dict. The Secret's files get mode 0444 so the proxy (UID 65532) can read them
whatever the pod's fsGroup; only containers that mount the volume see them.
*/}}
{{- define "bearer-proxy.sidecarVolumes" -}}
{{- $p := . -}}
- name: bearer-proxy-tmp
  emptyDir:
    sizeLimit: 64Mi
{{- if $p.secretName }}
- name: bearer-proxy-credentials
  secret:
    secretName: {{ $p.secretName }}
    defaultMode: 292
{{- end }}
{{- if $p.configMap }}
- name: bearer-proxy-config
  configMap:
    name: {{ $p.configMap }}
{{- end }}
{{- with $p.serviceAccountToken }}
- name: bearer-proxy-token
  projected:
    defaultMode: 292
    sources:
      - serviceAccountToken:
          path: token
          audience: {{ required "bearer-proxy.sidecar: serviceAccountToken.audience is required" .audience | quote }}
          expirationSeconds: {{ int (default 3600 .expirationSeconds) }}
{{- end }}
{{- end -}}
