{{/*
A Stakater Reloader values file, taken unchanged (`helm install wavelet charts/wavelet -f
reloader-values.yaml`): every key of Reloader's chart (2.2.16, and 2.2.17's
reloader.leaderElection) that wavelet can honour is mapped onto wavelet's values; a key it
cannot honour fails the render, naming it and what to do instead.

A Reloader value set to something other than Reloader's default wins over wavelet's value
for the same setting; at Reloader's default it changes nothing, so a whole copy of
Reloader's values.yaml renders wavelet's defaults.

Every template starts with
  {{- $v := include "wavelet.values" . | fromJson }}
and reads the effective values from $v: wavelet's own, with the Reloader values applied.
*/}}

{{- define "wavelet.values" -}}
{{- $v := deepCopy .Values -}}
{{- include "wavelet.reloader.check" . -}}
{{- include "wavelet.reloader.apply" (dict "v" $v "root" .) -}}
{{- toJson $v -}}
{{- end -}}

{{/* Fails, naming the key, for what Reloader's chart has and wavelet cannot honour. */}}
{{- define "wavelet.reloader.fail" -}}
{{- fail (printf "%s: %s (book: Coming from Reloader)" (index . 0) (index . 1)) -}}
{{- end -}}

{{/* Every key Reloader's chart reads, by level; anything else is not Reloader's. */}}
{{- define "wavelet.reloader.known" -}}
reloader: [autoReloadAll, isArgoRollouts, isOpenshift, ignoreSecrets, ignoreConfigMaps, ignoreJobs, ignoreCronJobs, reloadOnCreate, reloadOnDelete, syncAfterRestart, reloadStrategy, ignoreNamespaces, namespaceSelector, resourceLabelSelector, logFormat, logLevel, watchGlobally, namespaces, enableHA, enablePProf, enableCSIIntegration, pprofAddr, readOnlyRootFileSystem, legacy, matchLabels, enableMetricsByNamespace, deployment, service, rbac, serviceAccount, custom_annotations, serviceMonitor, podMonitor, podDisruptionBudget, netpol, verticalPodAutoscaler, webhookUrl, leaderElection]
reloader.deployment: [dnsConfig, replicas, revisionHistoryLimit, hostUsers, nodeSelector, affinity, volumeMounts, volumes, securityContext, containerSecurityContext, tolerations, topologySpreadConstraints, annotations, labels, env, livenessProbe, readinessProbe, resources, pod, priorityClassName, runtimeClassName, schedulerName, gomaxprocsOverride, gomemlimitOverride, imagePullSecrets, automountServiceAccountToken]
reloader.deployment.env: [open, secret, field, existing]
reloader.deployment.pod: [annotations]
reloader.rbac: [enabled, labels]
reloader.serviceAccount: [create, labels, annotations, name]
reloader.service: [labels, annotations, port, ipFamilyPolicy, ipFamilies]
reloader.serviceMonitor: [enabled, namespace, interval, scheme, tlsConfig, bearerTokenFile, timeout, labels, annotations, honorLabels, metricRelabelings, relabelings, targetLabels]
reloader.podMonitor: [enabled, namespace, interval, scheme, tlsConfig, bearerTokenSecret, timeout, labels, annotations, honorLabels, metricRelabelings, relabelings, podTargetLabels]
reloader.podDisruptionBudget: [enabled, minAvailable, maxUnavailable]
reloader.netpol: [enabled, from, to]
reloader.legacy: [rbac]
reloader.leaderElection: [leaseDuration, renewDeadline, retryPeriod]
{{- end -}}

{{- define "wavelet.reloader.check" -}}
{{- $r := .Values.reloader | default dict -}}
{{- $known := include "wavelet.reloader.known" . | fromYaml -}}
{{- range $path, $keys := $known -}}
{{- $at := $r -}}
{{- range $part := rest (splitList "." $path) -}}
{{- if kindIs "map" $at }}{{ $at = get $at $part }}{{ else }}{{ $at = dict }}{{ end -}}
{{- end -}}
{{- if kindIs "map" $at -}}
{{- range $key, $_ := $at -}}
{{- if not (has $key $keys) -}}
{{- include "wavelet.reloader.fail" (list (printf "%s.%s" $path $key) "not a value of Reloader's chart (2.2.16, or 2.2.17's reloader.leaderElection): check its spelling") -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* Reloader's keys outside `reloader`. */ -}}
{{- if .Values.nameOverride -}}{{- include "wavelet.reloader.fail" (list "nameOverride" "wavelet's objects are named wavelet; remove it") -}}{{- end -}}
{{- if .Values.fullnameOverride -}}{{- include "wavelet.reloader.fail" (list "fullnameOverride" "wavelet's objects are named wavelet; remove it") -}}{{- end -}}
{{- if .Values.namespace -}}{{- include "wavelet.reloader.fail" (list "namespace" "wavelet is installed in the release namespace: helm install --namespace NAMESPACE instead") -}}{{- end -}}
{{- if dig "imageRegistry" "" (.Values.global | default dict) -}}{{- include "wavelet.reloader.fail" (list "global.imageRegistry" "it names the registry of Reloader's image; set image.repository to where wavelet's image is") -}}{{- end -}}
{{- if and (contains "stakater/reloader" .Values.image.repository) (ne .Values.image.repository "ghcr.io/stakater/reloader") -}}{{- include "wavelet.reloader.fail" (list "image.repository" "it names a copy of Reloader's image; remove image.* from the Reloader values file and set image.repository to where wavelet's image is") -}}{{- end -}}
{{- /* Reloader's values wavelet cannot honour, when set. */ -}}
{{- if $r.isOpenshift -}}{{- include "wavelet.reloader.fail" (list "reloader.isOpenshift" "wavelet does not watch OpenShift DeploymentConfigs; remove it") -}}{{- end -}}
{{- if $r.enablePProf -}}{{- include "wavelet.reloader.fail" (list "reloader.enablePProf" "wavelet has no pprof server; /metrics exports its memory and CPU (process_resident_memory_bytes, process_cpu_seconds_total); remove it") -}}{{- end -}}
{{- if $r.enableCSIIntegration -}}{{- include "wavelet.reloader.fail" (list "reloader.enableCSIIntegration" "wavelet does not watch SecretProviderClassPodStatus objects") -}}{{- end -}}
{{- if $r.custom_annotations -}}{{- include "wavelet.reloader.fail" (list "reloader.custom_annotations" "wavelet reads Reloader's annotation keys as they are; rename the annotations on your workloads to Reloader's own keys and remove it") -}}{{- end -}}
{{- if $r.webhookUrl -}}{{- include "wavelet.reloader.fail" (list "reloader.webhookUrl" "Reloader's webhook replaces every rollout with a POST naming no object; wavelet does not stop rolling on a value. To be told instead of rolling: dryRun: true and the ALERT_* variables (reloader.deployment.env); to roll and be told: the ALERT_* variables only") -}}{{- end -}}
{{- if dig "verticalPodAutoscaler" "enabled" false $r -}}{{- include "wavelet.reloader.fail" (list "reloader.verticalPodAutoscaler.enabled" "wavelet's memory is flat in the size of objects (about 8 MiB at 8,000 objects): set reloader.deployment.resources (or resources) instead") -}}{{- end -}}
{{- if and (hasKey $r "reloadStrategy") (not (has $r.reloadStrategy (list "default" "env-vars" "annotations"))) -}}{{- include "wavelet.reloader.fail" (list "reloader.reloadStrategy" "expected default, env-vars or annotations, as Reloader") -}}{{- end -}}
{{- if and $r.logFormat (ne $r.logFormat "json") -}}{{- include "wavelet.reloader.fail" (list "reloader.logFormat" "expected json or empty, as Reloader") -}}{{- end -}}
{{- if and $r.ignoreSecrets $r.ignoreConfigMaps -}}{{- include "wavelet.reloader.fail" (list "reloader.ignoreSecrets" "together with reloader.ignoreConfigMaps it leaves nothing to watch (Reloader refuses both too); keep one") -}}{{- end -}}
{{- if and (dig "watchGlobally" true $r) $r.namespaces -}}{{- include "wavelet.reloader.fail" (list "reloader.namespaces" "it is set but reloader.watchGlobally is true; set reloader.watchGlobally=false to use scoped namespace mode (as Reloader's chart says)") -}}{{- end -}}
{{- end -}}

{{- define "wavelet.reloader.apply" -}}
{{- $v := .v -}}
{{- $root := .root -}}
{{- $r := $v.reloader | default dict -}}
{{- $d := $r.deployment | default dict -}}
{{- $args := list -}}
{{- $env := list -}}
{{- /* What the pod gets from these values, beside wavelet's own values. */ -}}
{{- $pod := dict -}}
{{- /* Reloader's own image values (a whole copy of its values.yaml has them) count as
       not given: wavelet's repository, and the chart's appVersion for Reloader's tag. */ -}}
{{- if eq $v.image.repository "ghcr.io/stakater/reloader" }}{{ $_ := set $v.image "repository" "wavelet" }}{{ end -}}
{{- if and $v.image.name (hasPrefix "v1." (toString $v.image.tag)) }}{{ $_ := set $v.image "tag" $root.Chart.AppVersion }}{{ end -}}
{{- /* Opt-in and what is watched. */ -}}
{{- if $r.autoReloadAll }}{{ $_ := set $v "autoReloadAll" true }}{{ end -}}
{{- if $r.ignoreSecrets }}{{ $_ := set $v "ignoreSecrets" true }}{{ end -}}
{{- if $r.ignoreConfigMaps }}{{ $_ := set $v "ignoreConfigMaps" true }}{{ end -}}
{{- if $r.ignoreCronJobs }}{{ $_ := set $v "ignoreCronJobs" true }}{{ end -}}
{{- if $r.isArgoRollouts }}{{ $args = append $args "--is-Argo-Rollouts=true" }}{{ end -}}
{{- /* Accepted as wavelet already behaves; wavelet says at start what it makes of each. */ -}}
{{- range $key := list "reloadOnCreate" "reloadOnDelete" "syncAfterRestart" -}}
{{- if get $r $key }}{{ $args = append $args (printf "--%s=true" (kebabcase $key)) }}{{ end -}}
{{- end -}}
{{- if and $r.reloadStrategy (ne $r.reloadStrategy "default") }}{{ $args = append $args (printf "--reload-strategy=%s" $r.reloadStrategy) }}{{ end -}}
{{- /* Namespaces, as Reloader: scoped (watchGlobally false: the release namespace and
       reloader.namespaces), or global with namespaces ignored and a selector. */ -}}
{{- if not (dig "watchGlobally" true $r) -}}
{{- $ns := $r.namespaces | default list -}}
{{- if kindIs "string" $ns }}{{ $ns = splitList "," $ns }}{{ end -}}
{{- $clean := list $root.Release.Namespace -}}
{{- range $ns }}{{ with trim (toString .) }}{{ $clean = append $clean . }}{{ end }}{{ end -}}
{{- $_ := set $v "namespaces" ($clean | uniq | sortAlpha) -}}
{{- else -}}
{{- with $r.ignoreNamespaces }}{{ $args = append $args (printf "--namespaces-to-ignore=%s" .) }}{{ end -}}
{{- with $r.namespaceSelector }}{{ $_ := set $v "namespaceSelector" . }}{{ end -}}
{{- end -}}
{{- with $r.resourceLabelSelector }}{{ $args = append $args (printf "--resource-label-selector=%s" .) }}{{ end -}}
{{- /* Logs, leader election, metrics. */ -}}
{{- if eq ($r.logFormat | default "") "json" }}{{ $_ := set $v "logFormat" "json" }}{{ end -}}
{{- if and $r.logLevel (ne $r.logLevel "info") }}{{ $_ := set $v "logLevel" $r.logLevel }}{{ end -}}
{{- if $r.enableHA }}{{ $_ := set $v "leaderElection" true }}{{ end -}}
{{- with $r.leaderElection -}}
{{- with .leaseDuration }}{{ $args = append $args (printf "--lease-duration=%s" (toString .)) }}{{ end -}}
{{- with .renewDeadline }}{{ $args = append $args (printf "--renew-deadline=%s" (toString .)) }}{{ end -}}
{{- with .retryPeriod }}{{ $args = append $args (printf "--retry-period=%s" (toString .)) }}{{ end -}}
{{- end -}}
{{- if $r.enableMetricsByNamespace }}{{ $args = append $args "--metrics-count-by-namespace=enabled" }}{{ end -}}
{{- /* The Deployment and its Pod. */ -}}
{{- if and (hasKey $d "replicas") (ne (int $d.replicas) 1) }}{{ $_ := set $v "replicas" (int $d.replicas) }}{{ end -}}
{{- range $key := list "nodeSelector" "affinity" "tolerations" "topologySpreadConstraints" "priorityClassName" "resources" -}}
{{- with get $d $key }}{{ $_ := set $v $key . }}{{ end -}}
{{- end -}}
{{- range $key := list "dnsConfig" "runtimeClassName" "schedulerName" -}}
{{- with get $d $key }}{{ $_ := set $pod $key . }}{{ end -}}
{{- end -}}
{{- if kindIs "bool" $d.hostUsers }}{{ $_ := set $pod "hostUsers" $d.hostUsers }}{{ end -}}
{{- if hasKey $d "automountServiceAccountToken" }}{{ $_ := set $pod "automountServiceAccountToken" $d.automountServiceAccountToken }}{{ end -}}
{{- if and (hasKey $d "revisionHistoryLimit") (ne (int $d.revisionHistoryLimit) 2) }}{{ $_ := set $pod "revisionHistoryLimit" (int $d.revisionHistoryLimit) }}{{ end -}}
{{- with $d.volumes }}{{ $_ := set $pod "volumes" . }}{{ end -}}
{{- with $d.volumeMounts }}{{ $_ := set $pod "volumeMounts" . }}{{ end -}}
{{- $reloaderPodSecurity := dict "runAsNonRoot" true "runAsUser" 65534 "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- if and (hasKey $d "securityContext") (not (deepEqual (toJson $d.securityContext | fromJson) (toJson $reloaderPodSecurity | fromJson))) }}{{ $_ := set $pod "securityContext" $d.securityContext }}{{ end -}}
{{- with $d.containerSecurityContext }}{{ $_ := set $pod "containerSecurityContext" . }}{{ end -}}
{{- if $r.readOnlyRootFileSystem -}}{{- /* wavelet's root filesystem is always read-only */ -}}{{- end -}}
{{- with $d.livenessProbe }}{{ $_ := set $pod "livenessProbe" . }}{{ end -}}
{{- with $d.readinessProbe }}{{ $_ := set $pod "readinessProbe" . }}{{ end -}}
{{- $labels := merge (dict) ($v.commonLabels | default dict) -}}
{{- $reloaderLabels := dict "provider" "stakater" "group" "com.stakater.platform" "version" "v1.4.21" -}}
{{- if and $d.labels (not (deepEqual (toJson $d.labels | fromJson) (toJson $reloaderLabels | fromJson))) }}{{ $labels = merge (dict) $d.labels $labels }}{{ end -}}
{{- with $r.matchLabels }}{{ $labels = merge (dict) . $labels }}{{ end -}}
{{- $_ := set $v "commonLabels" $labels -}}
{{- with $d.annotations }}{{ $_ := set $v "deploymentAnnotations" (merge (dict) . ($v.deploymentAnnotations | default dict)) }}{{ end -}}
{{- with (dig "pod" "annotations" dict $d) }}{{ $_ := set $v "podAnnotations" (merge (dict) . ($v.podAnnotations | default dict)) }}{{ end -}}
{{- $pullSecrets := $v.imagePullSecrets | default list -}}
{{- range (concat (dig "imagePullSecrets" list ($v.global | default dict)) ($d.imagePullSecrets | default list)) -}}
{{- $pullSecrets = append $pullSecrets (kindIs "map" . | ternary . (dict "name" (toString .))) -}}
{{- end -}}
{{- $_ := set $v "imagePullSecrets" $pullSecrets -}}
{{- /* Environment: env.open, env.secret (in a Secret of this chart), env.field, env.existing. */ -}}
{{- $e := $d.env | default dict -}}
{{- range $name, $value := $e.open }}{{ if $value }}{{ $env = append $env (dict "name" $name "value" (toString $value)) }}{{ end }}{{ end -}}
{{- $secret := dict -}}
{{- range $name, $value := $e.secret }}{{ if $value }}{{ $_ := set $secret $name (toString $value) }}{{ $env = append $env (dict "name" $name "valueFrom" (dict "secretKeyRef" (dict "name" "wavelet-env" "key" $name))) }}{{ end }}{{ end -}}
{{- range $name, $key := $e.existing -}}
{{- range $var, $k := $key }}{{ $env = append $env (dict "name" $var "valueFrom" (dict "secretKeyRef" (dict "name" $name "key" $k))) }}{{ end -}}
{{- end -}}
{{- range $name, $path := $e.field }}{{ if $path }}{{ $env = append $env (dict "name" $name "valueFrom" (dict "fieldRef" (dict "fieldPath" $path))) }}{{ end }}{{ end -}}
{{- $_ := set $v "envSecret" $secret -}}
{{- /* Objects beside the Deployment. */ -}}
{{- $service := $v.service | default dict -}}
{{- with $r.service }}{{ $service = merge (dict) . $service }}{{ end -}}
{{- $_ := set $v "service" $service -}}
{{- $rbac := $v.rbac | default dict -}}
{{- if and (hasKey ($r.rbac | default dict) "enabled") (not $r.rbac.enabled) }}{{ $_ := set $rbac "create" false }}{{ end -}}
{{- with dig "rbac" "labels" dict $r }}{{ $_ := set $rbac "labels" . }}{{ end -}}
{{- $_ := set $v "rbac" $rbac -}}
{{- $sa := $v.serviceAccount | default dict -}}
{{- with $r.serviceAccount -}}
{{- if and (hasKey . "create") (not .create) }}{{ $_ := set $sa "create" false }}{{ end -}}
{{- with .name }}{{ $_ := set $sa "name" . }}{{ end -}}
{{- with .labels }}{{ $_ := set $sa "labels" . }}{{ end -}}
{{- with .annotations }}{{ $_ := set $sa "annotations" . }}{{ end -}}
{{- end -}}
{{- $_ := set $v "serviceAccount" $sa -}}
{{- /* Prometheus Operator objects: each value Reloader's chart sets beyond its default
       (honorLabels: true is its default). */ -}}
{{- range $kind := list "serviceMonitor" "podMonitor" -}}
{{- $target := get $v.monitoring $kind -}}
{{- range $key, $value := (get $r $kind | default dict) -}}
{{- if eq $key "honorLabels" -}}
{{- if eq (toString $value) "false" }}{{ $_ := set $target "honorLabels" false }}{{ end -}}
{{- else if $value -}}
{{- $_ := set $target (eq $key "timeout" | ternary "scrapeTimeout" $key) $value -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $r.podDisruptionBudget }}{{ if .enabled }}{{ $_ := set $v "podDisruptionBudget" (merge (dict) . $v.podDisruptionBudget) }}{{ end }}{{ end -}}
{{- with $r.netpol }}{{ if .enabled }}{{ $_ := set $v "networkPolicy" (merge (dict) . $v.networkPolicy) }}{{ end }}{{ end -}}
{{- $_ := set $v "reloaderArgs" $args -}}
{{- $_ := set $v "reloaderEnv" $env -}}
{{- $_ := set $v "reloaderPod" $pod -}}
{{- end -}}
