{{/*
Names and labels. An engine chart that includes the sidecar templates passes a context with
"Values" (this chart's values as the engine sees them, .Values.relayd) and "Release"; the names
come from nameOverride/fullnameOverride or the release, as they do in this chart's own objects.
*/}}
{{- define "relayd.name" -}}
{{- default "relayd" .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "relayd.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default "relayd" .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "relayd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "relayd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "relayd.labels" -}}
{{ include "relayd.selectorLabels" . }}
app.kubernetes.io/part-of: relayd
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Chart }}
helm.sh/chart: {{ printf "%s-%s" .Name .Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .AppVersion | quote }}
{{- end }}
{{- end }}

{{/*
The image: image.tag, else this chart's appVersion. Included from an engine's chart (the sidecar)
.Chart is the engine's, so there image.tag must be given.
*/}}
{{- define "relayd.image" -}}
{{- $chart := .Chart | default dict }}
{{- $appVersion := "" }}
{{- if eq ($chart.Name | default "") "relayd" }}{{ $appVersion = $chart.AppVersion }}{{ end }}
{{- $tag := .Values.image.tag | default $appVersion }}
{{- if not $tag }}
{{- fail "relayd image.tag: give the relayd version to run (the sidecar cannot default it)" }}
{{- end }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}

{{/* The ConfigMap every relayd container reads its RELAYD_* options from. */}}
{{- define "relayd.configName" -}}
{{- printf "%s-config" (include "relayd.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The Secret of one `secrets` entry: its existingSecret, or the one the chart creates. */}}
{{- define "relayd.secretName" -}}
{{- $root := index . 0 }}{{- $key := index . 1 }}{{- $secret := index . 2 }}
{{- $secret.existingSecret | default (printf "%s-%s" (include "relayd.fullname" $root) $key | trunc 63 | trimSuffix "-") }}
{{- end }}

{{- define "relayd.secretMountPath" -}}
{{- $key := index . 0 }}{{- $secret := index . 1 }}
{{- $secret.mountPath | default (printf "/var/run/secrets/relayd/%s" $key) }}
{{- end }}

{{/*
The number of prefixes relayd relays: the list's items, a '{name-A..B}' range counting B-A+1
(the expansion relayd itself does).
*/}}
{{- define "relayd.prefixCount" -}}
{{- $count := 0 }}
{{- range $item := .Values.prefixes }}
{{- range $part := splitList "," $item }}
{{- $part = trim $part }}
{{- if regexMatch "^[^{}]*\\{[^{}]*?\\d+\\.\\.\\d+[^{}]*\\}.*$" $part }}
{{- $lo := regexReplaceAll "^[^{}]*\\{[^{}]*?(\\d+)\\.\\.(\\d+)[^{}]*\\}.*$" $part "${1}" | atoi }}
{{- $hi := regexReplaceAll "^[^{}]*\\{[^{}]*?(\\d+)\\.\\.(\\d+)[^{}]*\\}.*$" $part "${2}" | atoi }}
{{- $count = add $count (add1 (sub $hi $lo)) }}
{{- else if $part }}
{{- $count = add1 $count }}
{{- end }}
{{- end }}
{{- end }}
{{- $count }}
{{- end }}

{{/* The options as the ConfigMap holds them: the named values, the secrets' files, `options`. */}}
{{- define "relayd.configData" -}}
{{- $data := dict "RELAYD_REDIS_URL" .Values.redisUrl "RELAYD_PREFIX" (join "," .Values.prefixes) "RELAYD_SINK" .Values.sink }}
{{- range $key, $secret := .Values.secrets }}
{{- $path := include "relayd.secretMountPath" (list $key $secret) }}
{{- range $option, $file := $secret.files }}
{{- $_ := set $data $option (printf "%s/%s" $path $file) }}
{{- end }}
{{- end }}
{{- range $option, $value := .Values.options }}
{{- $_ := set $data $option (toString $value) }}
{{- end }}
{{- toYaml $data }}
{{- end }}

{{- define "relayd.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.runAsUser }}
runAsGroup: {{ .Values.runAsGroup }}
fsGroup: {{ .Values.runAsGroup }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "relayd.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.runAsUser }}
runAsGroup: {{ .Values.runAsGroup }}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "relayd.volumeMounts" -}}
{{- range $key, $secret := .Values.secrets }}
- name: secret-{{ $key }}
  mountPath: {{ include "relayd.secretMountPath" (list $key $secret) }}
  readOnly: true
{{- end }}
- name: tmp
  mountPath: /tmp
{{- end }}

{{/* The pod volumes relayd's container mounts: one per Secret, and /tmp. */}}
{{- define "relayd.sidecar.volumes" -}}
{{- $root := . }}
{{- range $key, $secret := .Values.secrets }}
- name: secret-{{ $key }}
  secret:
    secretName: {{ include "relayd.secretName" (list $root $key $secret) }}
    defaultMode: 0440
{{- end }}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpSizeLimit }}
{{- end }}

{{- define "relayd.probe" -}}
httpGet: {path: {{ index . 0 }}, port: metrics}
periodSeconds: {{ (index . 1).periodSeconds }}
timeoutSeconds: {{ (index . 1).timeoutSeconds }}
failureThreshold: {{ (index . 1).failureThreshold }}
{{- end }}

{{/*
relayd's container. The argument is a dict: "root" (the context: Values, Release, Chart),
"args" (the relayd command line), "metricsAddr", "probes" (bool), "readiness" (bool).
*/}}
{{- define "relayd.container" -}}
{{- $root := .root }}
{{- with $root }}
- name: relayd
  image: {{ include "relayd.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args: {{ toJson $.args }}
  envFrom:
    - configMapRef:
        name: {{ include "relayd.configName" . }}
  env:
    - name: RELAYD_METRICS_ADDR
      value: {{ $.metricsAddr | quote }}
    {{- with .Values.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- if $.probes }}
  ports:
    - name: metrics
      containerPort: {{ .Values.metricsPort }}
      protocol: TCP
  startupProbe:
    {{- include "relayd.probe" (list "/healthz" .Values.probes.startup) | nindent 4 }}
  livenessProbe:
    {{- include "relayd.probe" (list "/healthz" .Values.probes.liveness) | nindent 4 }}
  {{- if $.readiness }}
  readinessProbe:
    {{- include "relayd.probe" (list "/readyz" .Values.probes.readiness) | nindent 4 }}
  {{- end }}
  {{- end }}
  resources:
    {{- toYaml .Values.resources | nindent 4 }}
  securityContext:
    {{- include "relayd.containerSecurityContext" . | nindent 4 }}
  volumeMounts:
    {{- include "relayd.volumeMounts" . | nindent 4 }}
{{- end }}
{{- end }}

{{/*
The sidecar: relayd's container for an engine's pod, given this chart's context (Values,
Release, Chart). Start-up and liveness probes on /healthz and no readinessProbe: a pod is ready
only when all its containers are, and relayd's /readyz (Redis or a sink unhealthy) would take
the engine out of its Service. In the engine's chart:
  containers:
    {{- include "relayd.sidecar.container" (dict "Values" .Values.relayd "Release" .Release) | nindent 4 }}
  volumes:
    {{- include "relayd.sidecar.volumes" (dict "Values" .Values.relayd "Release" .Release) | nindent 4 }}
*/}}
{{- define "relayd.sidecar.container" -}}
{{- include "relayd.container" (dict "root" . "args" (list "sweep") "metricsAddr" (printf "0.0.0.0:%v" .Values.metricsPort) "probes" true "readiness" false) }}
{{- end }}

{{/* The pod-level settings relayd's pods share. */}}
{{- define "relayd.podSpecCommon" -}}
automountServiceAccountToken: false
{{- if .Values.serviceAccount.create }}
serviceAccountName: {{ .Values.serviceAccount.name | default (include "relayd.fullname" .) }}
{{- else if .Values.serviceAccount.name }}
serviceAccountName: {{ .Values.serviceAccount.name }}
{{- end }}
securityContext:
  {{- include "relayd.podSecurityContext" . | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "relayd.podAnnotations" -}}
checksum/config: {{ include "relayd.configData" . | sha256sum }}
{{- if .Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.metricsPort | quote }}
prometheus.io/path: "/metrics"
{{- end }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The replica cap of autoscaling: its maxReplicas, else the number of prefixes. */}}
{{- define "relayd.maxReplicas" -}}
{{- if .maxReplicas }}{{ .maxReplicas }}{{ else }}{{ include "relayd.prefixCount" .root }}{{ end }}
{{- end }}
