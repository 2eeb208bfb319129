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
