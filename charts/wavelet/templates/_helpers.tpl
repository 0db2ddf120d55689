{{/*
The rules of what wavelet does in every namespace it watches: one list for the ClusterRole
(cluster-wide) and for each per-namespace Role (`namespaces`), so the two cannot drift.
Exactly manifests/cluster-wide/clusterrole.yaml, plus list/watch/patch for each kind of
`workloadKinds` that is not one of those already granted.
*/}}
{{- define "wavelet.watchRules" -}}
- apiGroups: [""]
  resources: [configmaps]
  verbs: [list, watch]
# Secrets are watched as metadata only; the data of those a workload references (or
# that carry a delete-mode selector) is read with one GET each.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch]
- apiGroups: [apps]
  resources: [deployments, statefulsets, daemonsets]
  verbs: [list, watch, patch]
# CronJobs: the hash goes onto the job template.
- apiGroups: [batch]
  resources: [cronjobs]
  verbs: [list, watch, patch]
# A CronJob opted in through Reloader's keys also gets one Job started on a change.
- apiGroups: [batch]
  resources: [jobs]
  verbs: [create]
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
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- range $resource := include "wavelet.customResources" . | fromJsonArray }}
# --workload-kinds: watched and patched like the built-in kinds.
- apiGroups: [{{ index $resource 0 | quote }}]
  resources: [{{ index $resource 1 }}]
  verbs: [list, watch, patch]
{{- end }}
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

{{/*
--enable-csi-integration: the Secrets Store CSI driver's resources, read-only (exactly
manifests/csi/clusterrole.yaml).
*/}}
{{- define "wavelet.csiRules" -}}
- apiGroups: [secrets-store.csi.x-k8s.io]
  resources: [secretproviderclasses, secretproviderclasspodstatuses]
  verbs: [list, watch]
{{- end }}
