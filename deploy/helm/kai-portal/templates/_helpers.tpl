{{/* Names and labels. */}}
{{- define "kai-portal.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kai-portal.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kai-portal.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "kai-portal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: web, worker, beat, migrate, postgresql, redis. */}}
{{- define "kai-portal.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kai-portal.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "kai-portal.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kai-portal.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The web pods' account: it may only write KAI Queue objects (a quota edited in the portal). */}}
{{- define "kai-portal.webServiceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (printf "%s-web" (include "kai-portal.fullname" .)) .Values.serviceAccount.webName -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.webName -}}
{{- end -}}
{{- end -}}

{{- define "kai-portal.secretName" -}}
{{- default (include "kai-portal.fullname" .) .Values.existingSecret -}}
{{- end -}}

{{- define "kai-portal.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The database and Redis URLs: the trial services when enabled, else the values (required). */}}
{{- define "kai-portal.databaseUrl" -}}
{{- if .Values.trial.postgresql.enabled -}}
{{- printf "postgres://kai:%s@%s-postgresql:5432/kai_portal" .Values.trial.postgresql.password (include "kai-portal.fullname" .) -}}
{{- else -}}
{{- required "set databaseUrl (postgres://user:password@host:5432/db), existingSecret, or trial.postgresql.enabled=true" .Values.databaseUrl -}}
{{- end -}}
{{- end -}}

{{- define "kai-portal.redisUrl" -}}
{{- if .Values.trial.redis.enabled -}}
{{- printf "redis://%s-redis:6379/0" (include "kai-portal.fullname" .) -}}
{{- else -}}
{{- required "set redisUrl (redis://host:6379/0), existingSecret, or trial.redis.enabled=true" .Values.redisUrl -}}
{{- end -}}
{{- end -}}

{{/* What every portal container gets: settings from the ConfigMap, secrets from the Secret. */}}
{{- define "kai-portal.envFrom" -}}
- configMapRef:
    name: {{ include "kai-portal.fullname" . }}
- secretRef:
    name: {{ include "kai-portal.secretName" . }}
{{- end -}}

{{/* Roll the pods when settings or chart-managed secrets change. */}}
{{- define "kai-portal.checksums" -}}
checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
{{- if not .Values.existingSecret }}
checksum/secret: {{ include (print $.Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end }}
{{- end -}}

{{/* Writable scratch space under a read-only root filesystem. */}}
{{- define "kai-portal.volumes" -}}
- name: tmp
  emptyDir: {}
- name: var
  emptyDir: {}
{{- end -}}

{{- define "kai-portal.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: var
  mountPath: /app/var
{{- end -}}

{{- define "kai-portal.podScheduling" -}}
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
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
