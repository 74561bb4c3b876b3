{{/* Named templates of the claimguard chart: names, labels, the image, and the sidecar. */}}

{{- define "claimguard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "claimguard.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The injector's objects: Deployment, Service, certificate (at most 63 - 7 characters). */}}
{{- define "claimguard.injectorName" -}}
{{- printf "%s-inject" (include "claimguard.fullname" . | trunc 56 | trimSuffix "-") }}
{{- end }}

{{- define "claimguard.tlsSecretName" -}}
{{- printf "%s-tls" (include "claimguard.injectorName" .) }}
{{- end }}

{{- define "claimguard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "claimguard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "claimguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "claimguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "claimguard.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The cluster version the chart renders for: webhook.kubernetesVersion, else Helm's. */}}
{{- define "claimguard.kubeVersion" -}}
{{- default .Capabilities.KubeVersion.Version .Values.webhook.kubernetesVersion }}
{{- end }}

{{/* "true" when the sidecar is a native sidecar (Kubernetes >= 1.29 unless forced). */}}
{{- define "claimguard.native" -}}
{{- if eq .Values.sidecar.native "always" }}true
{{- else if eq .Values.sidecar.native "never" }}false
{{- else if semverCompare ">=1.29-0" (include "claimguard.kubeVersion" .) }}true
{{- else }}false
{{- end }}
{{- end }}

{{/* The hardened container security context shared by the injector and the sidecar. */}}
{{- define "claimguard.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.sidecar.runAsUser }}
runAsGroup: {{ .Values.sidecar.runAsUser }}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
The sidecar container, field for field what `claimguard inject` adds (proxy/inject/sidecar.cpp;
tests/helm checks the two agree). Call with (dict "root" $ "backend" B "redis" R "native" bool).
*/}}
{{- define "claimguard.sidecarContainer" -}}
{{- $root := .root }}
{{- $s := $root.Values.sidecar }}
{{- $port := int $s.admin.port }}
name: claimguard
image: {{ include "claimguard.image" $root | quote }}
imagePullPolicy: {{ $root.Values.image.pullPolicy }}
args:
  - serve
  - --listen
  - {{ printf "127.0.0.1:%d" (int $s.listenPort) | quote }}
  - --backend
  - {{ .backend | quote }}
  - --admin
  - {{ printf "%s:%d" $s.admin.address $port | quote }}
  - --rules-dir
  - {{ $s.rulesMountPath | quote }}
  {{- if ne (int $s.controlPort) 9091 }}
  - --control
  - {{ printf "127.0.0.1:%d" (int $s.controlPort) | quote }}
  {{- end }}
  {{- with .redis }}
  - --redis
  - {{ . | quote }}
  {{- end }}
  {{- with include "claimguard.redisArgs" $root | trim }}
  {{- . | nindent 2 }}
  {{- end }}
  {{- with $s.unixSocket }}
  - --listen-unix
  - {{ . | quote }}
  {{- end }}
  {{- range $s.extraArgs }}
  - {{ . | quote }}
  {{- end }}
ports:
  - name: cg-admin
    containerPort: {{ $port }}
    protocol: TCP
startupProbe:
  httpGet: {path: /startup, port: {{ $port }}}
  periodSeconds: 1
  timeoutSeconds: 2
  failureThreshold: 60
livenessProbe:
  httpGet: {path: /liveness, port: {{ $port }}}
  periodSeconds: 10
  timeoutSeconds: 2
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readiness, port: {{ $port }}}
  periodSeconds: 5
  timeoutSeconds: 2
  failureThreshold: 3
securityContext:
  {{- include "claimguard.containerSecurityContext" $root | nindent 2 }}
volumeMounts:
  - name: claimguard-rules
    mountPath: {{ $s.rulesMountPath | quote }}
    readOnly: true
  {{- with $s.unixSocket }}
  - name: claimguard-socket
    mountPath: {{ dir . | quote }}
  {{- end }}
  {{- $r := $root.Values.redis }}
  {{- if $r.passwordSecret.name }}
  - name: claimguard-redis-auth
    mountPath: /etc/claimguard/redis-auth
    readOnly: true
  {{- end }}
  {{- if and $r.tls.enabled $r.tls.secret }}
  - name: claimguard-redis-tls
    mountPath: /etc/claimguard/redis-tls
    readOnly: true
  {{- end }}
{{- $env := $s.env | default list }}
{{- if or $env $s.schemaCheckSecret.name }}
env:
  {{- with $env }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- with $s.schemaCheckSecret.name }}
  - name: CLAIMGUARD_SCHEMA_CHECK_USER
    valueFrom:
      secretKeyRef: {name: {{ . | quote }}, key: {{ $s.schemaCheckSecret.userKey | quote }}}
  - name: CLAIMGUARD_SCHEMA_CHECK_PASSWORD
    valueFrom:
      secretKeyRef: {name: {{ . | quote }}, key: {{ $s.schemaCheckSecret.passwordKey | quote }}}
  {{- end }}
{{- end }}
{{- if $s.resources }}
resources:
  {{- toYaml $s.resources | nindent 2 }}
{{- end }}
{{- if .native }}
restartPolicy: Always
{{- else }}
lifecycle:
  preStop:
    exec:
      command: ["/usr/local/bin/claimguard", "shutdown", "--control", {{ printf "127.0.0.1:%d" (int $s.controlPort) | quote }}]
  {{- if $s.holdApplicationUntilReady }}
  postStart:
    exec:
      command: ["/bin/bash", "-c", {{ include "claimguard.holdScript" $port | quote }}]
  {{- end }}
{{- end }}
{{- end }}

{{/*
The plain sidecar's postStart wait (holdApplicationUntilReady), byte for byte what the injector
writes (proxy/inject/sidecar.cpp hold_application_command): GET /startup until 200, 60 s at most.
Call with the admin port.
*/}}
{{- define "claimguard.holdScript" -}}
{{- printf `for i in $(seq 1 600); do if exec 3<>/dev/tcp/127.0.0.1/%d; then printf 'GET /startup HTTP/1.0\r\n\r\n' >&3; if head -n 1 <&3 | grep -q ' 200 '; then exit 0; fi; exec 3<&-; fi 2>/dev/null; sleep 0.1; done; echo 'claimguard: not started after 60 s' >&2; exit 1` (int .) }}
{{- end }}

{{/* The labels and annotations of a pod with the sidecar (scrape annotations; the PodMonitor label). */}}
{{- define "claimguard.scrapeAnnotations" -}}
{{- if .Values.sidecar.scrapeAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.sidecar.admin.port | toString | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end }}

{{/* The webhooks' namespaceSelector expressions that exclude namespaces. */}}
{{- define "claimguard.excludedNamespaces" -}}
{{- $excluded := concat .Values.webhook.excludeNamespaces (list .Release.Namespace) | uniq -}}
- key: kubernetes.io/metadata.name
  operator: NotIn
  values:
    {{- range $excluded }}
    - {{ . | quote }}
    {{- end }}
{{- end }}

{{/*
The sidecar's Redis flags from .Values.redis (cluster, ACL user, password file, TLS). Nothing with
the defaults, so the chart's sidecar still matches what the webhook injects.
*/}}
{{- define "claimguard.redisArgs" -}}
{{- $r := .Values.redis }}
{{- if $r.cluster }}
- --redis-cluster
{{- end }}
{{- with $r.user }}
- --redis-user
- {{ . | quote }}
{{- end }}
{{- if $r.passwordSecret.name }}
- --redis-password-file
- {{ printf "/etc/claimguard/redis-auth/%s" $r.passwordSecret.key | quote }}
{{- end }}
{{- if $r.tls.enabled }}
- --redis-tls
{{- if not $r.tls.verify }}
- --no-redis-tls-verify
{{- end }}
{{- with $r.tls.serverName }}
- --redis-tls-server-name
- {{ . | quote }}
{{- end }}
{{- if $r.tls.secret }}
- --redis-tls-ca
- /etc/claimguard/redis-tls/ca.crt
{{- if $r.tls.clientCertificate }}
- --redis-tls-cert
- /etc/claimguard/redis-tls/tls.crt
- --redis-tls-key
- /etc/claimguard/redis-tls/tls.key
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The Secret volumes the Redis flags name (mode: sidecar). */}}
{{- define "claimguard.redisVolumes" -}}
{{- $r := .Values.redis }}
{{- if $r.passwordSecret.name }}
- name: claimguard-redis-auth
  secret:
    secretName: {{ $r.passwordSecret.name }}
    items:
      - key: {{ $r.passwordSecret.key }}
        path: {{ $r.passwordSecret.key }}
{{- end }}
{{- if and $r.tls.enabled $r.tls.secret }}
- name: claimguard-redis-tls
  secret:
    secretName: {{ $r.tls.secret }}
{{- end }}
{{- end }}
