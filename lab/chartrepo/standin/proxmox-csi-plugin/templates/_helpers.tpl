{{- /* The release's base name for its objects: the release name when it already holds the chart's name, else <release>-<chart>. */ -}}
{{- define "csi.base" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "csi.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- /* Pod selector of a part ("controller", "node"): call with (list $ "part"). */ -}}
{{- define "csi.selector" -}}
{{- $top := index . 0 -}}
app.kubernetes.io/name: {{ $top.Chart.Name }}
app.kubernetes.io/instance: {{ $top.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "csi.image" -}}
{{- $img := index . 0 -}}
{{- printf "%s:%s" $img.repository (default (index . 1) $img.tag) -}}
{{- end -}}

{{- /* A StorageClass's parameters: extraParameters, then the ones the chart computes. */ -}}
{{- define "csi.scParameters" -}}
{{- $p := dict -}}
{{- range $k, $v := .extraParameters -}}
{{- $_ := set $p $k (toString $v) -}}
{{- end -}}
{{- $_ := set $p "csi.storage.k8s.io/fstype" (default "ext4" .fstype) -}}
{{- $_ := set $p "storage" (required (printf "storageClass %s: storage (the Proxmox datastore) is required" .name) .storage) -}}
{{- if .cache -}}
{{- $_ := set $p "cache" (toString .cache) -}}
{{- end -}}
{{- if .ssd -}}
{{- $_ := set $p "ssd" "true" -}}
{{- end -}}
{{- toYaml $p -}}
{{- end -}}
