{{/*
Names are fixed (not prefixed by the release): tasq is one controller per cluster, and its serving
certificate names the two Services, as the kustomize bundle in config/ does.
*/}}
{{- define "tasq.labels" -}}
app.kubernetes.io/name: tasq
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "tasq.selectorLabels" -}}
app.kubernetes.io/name: tasq
control-plane: controller-manager
{{- end }}

{{- define "tasq.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{- define "tasq.featureGates" -}}
{{- $gates := list -}}
{{- range $name := keys .Values.featureGates | sortAlpha -}}
{{- $gates = append $gates (printf "%s=%t" $name (get $.Values.featureGates $name)) -}}
{{- end -}}
{{- join "," $gates -}}
{{- end }}

{{- define "tasq.certDir" -}}/tmp/k8s-webhook-server/serving-certs{{- end }}

{{- define "tasq.checkCertificates" -}}
{{- if and (not .Values.certificates.certManager.enabled) (not .Values.certificates.caBundle) -}}
{{- fail "certificates: without cert-manager (certificates.certManager.enabled=false), set certificates.caBundle to the base64 ca.crt of the Secret you create (certificates.secretName): the CRDs' conversion and the webhooks trust it" -}}
{{- end -}}
{{- end }}

{{- /* The mark that makes an installed CRD (a `lookup` answer; empty when none is installed, and under
`helm template` without a cluster) an installed Kueue's, as controller/api/crd_ownership.py reads it:
controller-gen's version annotation, the name label `kueue` or a `kueue-` chart label. Empty for tasq's. */}}
{{- define "tasq.kueueMark" -}}
{{- $meta := .metadata | default dict -}}
{{- $annotations := $meta.annotations | default dict -}}
{{- $labels := $meta.labels | default dict -}}
{{- if hasKey $annotations "controller-gen.kubebuilder.io/version" -}}
annotation controller-gen.kubebuilder.io/version={{ index $annotations "controller-gen.kubebuilder.io/version" }}
{{- else if eq (index $labels "app.kubernetes.io/name" | default "") "kueue" -}}
label app.kubernetes.io/name=kueue
{{- else if hasPrefix "kueue-" (index $labels "helm.sh/chart" | default "") -}}
label helm.sh/chart={{ index $labels "helm.sh/chart" }}
{{- end -}}
{{- end }}
