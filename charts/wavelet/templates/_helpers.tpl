{{/*
The rules of what wavelet does in every namespace it watches: one list for the ClusterRole
(cluster-wide) and for each per-namespace Role (`namespaces`), so the two cannot drift.
Exactly manifests/cluster-wide/clusterrole.yaml, plus list/watch/patch for each kind of
`workloadKinds` that is not one of those already granted.
*/}}
{{- define "wavelet.watchRules" -}}
{{- if not .Values.ignoreConfigMaps }}
- apiGroups: [""]
  resources: [configmaps]
  verbs: [list, watch]
{{- end }}
{{- if not .Values.ignoreSecrets }}
# Secrets are watched as metadata only; the data of those a workload references (or
# that carry a delete-mode selector) is read with one GET each.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch]
{{- end }}
- apiGroups: [apps]
  resources: [deployments, statefulsets, daemonsets]
  verbs: [list, watch, patch]
{{- if not .Values.ignoreCronJobs }}
# CronJobs: the hash goes onto the job template.
- apiGroups: [batch]
  resources: [cronjobs]
  verbs: [list, watch, patch]
# A CronJob opted in through Reloader's keys also gets one Job started on a change.
- apiGroups: [batch]
  resources: [jobs]
  verbs: [create]
{{- end }}
# Argo Rollouts, watched when the API serves them (wavelet asks discovery at start).
- apiGroups: [argoproj.io]
  resources: [rollouts]
  verbs: [list, watch, patch]
- apiGroups: [""]
  resources: [pods]
  verbs: [list, delete]
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
# Events: a Warning is looked up before it is written (the same one after a restart
# adds to its count), and a repeated one counts up with a patch.
- apiGroups: [""]
  resources: [events]
  verbs: [create, get, patch]
{{- range $resource := include "wavelet.customResources" . | fromJsonArray }}
# --workload-kinds: watched and patched like the built-in kinds.
- apiGroups: [{{ index $resource 0 | quote }}]
  resources: [{{ index $resource 1 }}]
  verbs: [list, watch, patch]
{{- end }}
{{- end }}

{{/*
"true" when wavelet watches every namespace with a ClusterRole: no `namespaces`, or more
than 10 of them without `perNamespaceWatches` (then it watches each resource once over all
namespaces and keeps those listed; the binary decides the same way). Otherwise one Role
per namespace.
*/}}
{{- define "wavelet.clusterWide" -}}
{{- if or (not .Values.namespaces) (and (gt (len .Values.namespaces) 10) (not .Values.perNamespaceWatches)) -}}
true
{{- end -}}
{{- end }}

{{/*
The [group, resource] pairs of `workloadKinds` that the rules above do not grant yet, in
order and without duplicates (two versions of one resource are one grant), as JSON.
*/}}
{{- define "wavelet.customResources" -}}
{{- $granted := list "apps/deployments" "apps/statefulsets" "apps/daemonsets" "batch/cronjobs" "argoproj.io/rollouts" -}}
{{- $out := list -}}
{{- range .Values.workloadKinds -}}
{{- $parts := splitList "/" . -}}
{{- $key := printf "%s/%s" (index $parts 0) (index $parts 2) -}}
{{- if not (has $key $granted) -}}
{{- $granted = append $granted $key -}}
{{- $out = append $out (list (index $parts 0) (index $parts 2)) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end }}


{{/* The labels of every object: wavelet's name, and `commonLabels`. Takes the effective values. */}}
{{- define "wavelet.labels" -}}
app.kubernetes.io/name: wavelet
{{- range $k, $v := .commonLabels }}
{{- if ne $k "app.kubernetes.io/name" }}
{{ $k }}: {{ $v | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the Pod runs as (effective values): wavelet's, another one named
in serviceAccount.name, or with serviceAccount.create false and no name, `default` (as
Reloader's chart). */}}
{{- define "wavelet.serviceAccountName" -}}
{{- $sa := .serviceAccount | default dict -}}
{{- if $sa.name -}}
{{ $sa.name }}
{{- else if eq (toString (dig "create" true $sa)) "false" -}}
default
{{- else -}}
wavelet
{{- end -}}
{{- end }}

{{/* The labels of the RBAC objects: wavelet's, and rbac.labels. */}}
{{- define "wavelet.rbacLabels" -}}
{{ include "wavelet.labels" . }}
{{- range $k, $v := (dig "labels" dict (.rbac | default dict)) }}
{{ $k }}: {{ $v | quote }}
{{- end }}
{{- end }}

{{/* A ServiceMonitor endpoint's or a PodMonitor endpoint's optional scrape settings, as
Reloader's chart renders them. */}}
{{- define "wavelet.scrapeOptions" -}}
{{- with .scheme }}
scheme: {{ . }}
{{- end }}
{{- with .tlsConfig }}
tlsConfig: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .bearerTokenFile }}
bearerTokenFile: {{ . }}
{{- end }}
{{- with .bearerTokenSecret }}
bearerTokenSecret: {{- toYaml . | nindent 2 }}
{{- end }}
{{- if hasKey . "honorLabels" }}
honorLabels: {{ .honorLabels }}
{{- end }}
{{- with .metricRelabelings }}
metricRelabelings: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .relabelings }}
relabelings: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{/*
--enable-csi-integration: the Secrets Store CSI driver's resources, and the running Pods
and ReplicaSets that tell which Pods vote, read-only (exactly manifests/csi/clusterrole.yaml).
*/}}
{{- define "wavelet.csiRules" -}}
- apiGroups: [secrets-store.csi.x-k8s.io]
  resources: [secretproviderclasses, secretproviderclasspodstatuses]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch]
- apiGroups: [apps]
  resources: [replicasets]
  verbs: [list, watch]
{{- end }}
