package etcdbackup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/template"
)

// DefaultImage is siderolabs/talos-backup's newest release (tag v0.1.0-beta.3, 2025-02-10); its
// Makefile publishes images to ghcr.io/siderolabs.
const DefaultImage = "ghcr.io/siderolabs/talos-backup:v0.1.0-beta.3"

// BackupNamespace is where the CronJob runs; the Talos API access patch allows it.
const BackupNamespace = "kube-system"

// backupName names the CronJob, the Talos ServiceAccount and the Secret Talos creates for it.
const backupName = "talos-backup"

// CronJobOptions describes scheduled in-cluster backups by talos-backup.
type CronJobOptions struct {
	// ClusterName is the cluster's name: snapshots go under <prefix>/<ClusterName>/, beside Take's.
	ClusterName string
	// Destination must be an s3:// destination with a region.
	Destination Destination
	// Schedule is a 5-field cron schedule (see ParseSchedule).
	Schedule string
	// Recipients are age X25519 public keys; talos-backup encrypts to one, so at most one. None
	// means snapshots are stored unencrypted (DISABLE_ENCRYPTION).
	Recipients []string
	// CredentialsSecret names a Secret in kube-system with the keys AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY.
	CredentialsSecret string
	// Image is the talos-backup image; empty means DefaultImage.
	Image string
}

// CronJobManifests renders the Kubernetes objects for scheduled backups: a Talos ServiceAccount
// (talos.dev/v1alpha1) with role os:etcd:backup, for which Talos writes a Secret holding a
// talosconfig, and a CronJob in kube-system running talos-backup with that Secret mounted. Their
// environment is the one talos-backup v0.1.0-beta.3 reads (pkg/config/service.go). talos-backup
// names its objects <S3_PREFIX>/<CLUSTER_NAME>-<RFC 3339 time>.snap[.age], which Take's pruning
// never matches: it keeps every snapshot (use a bucket lifecycle rule to expire them). The
// machine configuration must allow the access: see TalosAPIAccessPatch. The output is
// deterministic: the same options render the same bytes.
func CronJobManifests(opts CronJobOptions) (string, error) {
	v, err := cronJobValues(opts)
	if err != nil {
		return "", err
	}

	var out bytes.Buffer
	if err := manifestsTemplate.Execute(&out, v); err != nil {
		return "", fmt.Errorf("rendering the talos-backup manifests: %w", err)
	}

	return out.String(), nil
}

// envVar is one literal environment variable of the CronJob's container.
type envVar struct{ Name, Value, Comment string }

type cronJobTemplateValues struct {
	Name, Namespace, Image, Schedule, CredentialsSecret string
	Env                                                 []envVar
}

func cronJobValues(opts CronJobOptions) (cronJobTemplateValues, error) {
	var problems []error

	d := opts.Destination

	switch d.Scheme {
	case "s3":
		if d.Query.Get("region") == "" {
			problems = append(problems, errors.New("scheduled backups need the destination's region (s3://bucket/prefix?region=…): talos-backup reads it from AWS_REGION"))
		}
	case "file":
		problems = append(problems, fmt.Errorf("scheduled backups run inside the cluster and upload to S3: destination %s is a local directory; give an s3:// destination or no schedule", d))
	default:
		problems = append(problems, errors.New("scheduled backups need an s3:// destination"))
	}

	if err := checkClusterName(opts.ClusterName); err != nil {
		problems = append(problems, err)
	}

	if _, err := ParseSchedule(opts.Schedule); err != nil {
		problems = append(problems, err)
	}

	if len(opts.Recipients) > 1 {
		problems = append(problems, fmt.Errorf("scheduled backups encrypt to one recipient (talos-backup reads one AGE_X25519_PUBLIC_KEY), %d are given", len(opts.Recipients)))
	} else if _, err := ParseRecipients(opts.Recipients); err != nil {
		problems = append(problems, err)
	}

	if !dnsLabel(opts.CredentialsSecret) {
		problems = append(problems, fmt.Errorf("credentialsSecret %q is not a Kubernetes Secret name: name the Secret in %s that holds AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", opts.CredentialsSecret, BackupNamespace))
	}

	if err := errors.Join(problems...); err != nil {
		return cronJobTemplateValues{}, err
	}

	image := opts.Image
	if image == "" {
		image = DefaultImage
	}

	env := []envVar{
		{Name: "BUCKET", Value: d.Bucket},
		{Name: "S3_PREFIX", Value: strings.TrimSuffix(d.ClusterPrefix(opts.ClusterName), "/")},
		{Name: "CLUSTER_NAME", Value: opts.ClusterName},
		{Name: "AWS_REGION", Value: d.Query.Get("region")},
	}

	if endpoint := d.Query.Get("endpoint"); endpoint != "" {
		env = append(env, envVar{Name: "CUSTOM_S3_ENDPOINT", Value: endpoint})

		if pathStyle(d) {
			// talos-backup v0.1.0-beta.3 sets UsePathStyle = (USE_PATH_STYLE == "false"), and only
			// with a custom endpoint: "false" is what turns path-style requests on.
			env = append(env, envVar{Name: "USE_PATH_STYLE", Value: "false", Comment: `talos-backup v0.1.0-beta.3 turns path-style requests on when this is "false"`})
		}
	}

	if len(opts.Recipients) == 1 {
		env = append(env, envVar{Name: "AGE_X25519_PUBLIC_KEY", Value: strings.TrimSpace(opts.Recipients[0])})
	} else {
		env = append(env, envVar{Name: "DISABLE_ENCRYPTION", Value: "true"})
	}

	return cronJobTemplateValues{
		Name: backupName, Namespace: BackupNamespace, Image: image,
		Schedule: strings.TrimSpace(opts.Schedule), CredentialsSecret: opts.CredentialsSecret, Env: env,
	}, nil
}

// pathStyle says whether the destination asks for path-style S3 requests.
func pathStyle(d Destination) bool {
	for _, k := range []string{"s3ForcePathStyle", "use_path_style"} {
		if v, err := strconv.ParseBool(d.Query.Get(k)); err == nil && v {
			return true
		}
	}

	return false
}

// dnsLabel says whether s is a Kubernetes object name (an RFC 1123 label).
func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}

	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}

	return true
}

// quote renders s as a YAML double-quoted scalar (a JSON string is one).
func quote(s string) string {
	b, _ := json.Marshal(s) //nolint:errcheck // a string always marshals

	return string(b)
}

var manifestsTemplate = template.Must(template.New("talos-backup").Funcs(template.FuncMap{"q": quote}).Parse(`apiVersion: talos.dev/v1alpha1
kind: ServiceAccount
metadata:
  name: {{ .Name }}
  namespace: {{ .Namespace }}
spec:
  roles:
    - os:etcd:backup
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: {{ .Name }}
  namespace: {{ .Namespace }}
spec:
  schedule: {{ q .Schedule }}
  concurrencyPolicy: Forbid
  jobTemplate:
    spec:
      backoffLimit: 3
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - name: talos-backup
              image: {{ q .Image }}
              imagePullPolicy: IfNotPresent
              command:
                - /talos-backup
              workingDir: /tmp
              env:
{{- range .Env }}
{{- if .Comment }}
                # {{ .Comment }}
{{- end }}
                - name: {{ .Name }}
                  value: {{ q .Value }}
{{- end }}
                - name: AWS_ACCESS_KEY_ID
                  valueFrom:
                    secretKeyRef:
                      name: {{ q .CredentialsSecret }}
                      key: AWS_ACCESS_KEY_ID
                - name: AWS_SECRET_ACCESS_KEY
                  valueFrom:
                    secretKeyRef:
                      name: {{ q .CredentialsSecret }}
                      key: AWS_SECRET_ACCESS_KEY
              securityContext:
                runAsUser: 1000
                runAsGroup: 1000
                runAsNonRoot: true
                allowPrivilegeEscalation: false
                capabilities:
                  drop:
                    - ALL
                seccompProfile:
                  type: RuntimeDefault
              volumeMounts:
                - name: tmp
                  mountPath: /tmp
                - name: talos-secrets
                  mountPath: /var/run/secrets/talos.dev
          volumes:
            - name: tmp
              emptyDir: {}
            - name: talos-secrets
              secret:
                secretName: {{ .Name }}
`))

// TalosAPIAccessPatch is the machine-configuration patch scheduled backups need: it lets pods in
// kube-system hold Talos ServiceAccounts with the role os:etcd:backup. It is the v1alpha1 form
// every Talos version since 1.2 reads; machinery v1.14 deprecates it in favour of a
// KubeTalosAPIAccessConfig document (the two must not be combined). Apply it to control plane
// nodes only: Talos rejects a worker's configuration that enables this feature.
func TalosAPIAccessPatch() string {
	return `machine:
  features:
    kubernetesTalosAPIAccess:
      enabled: true
      allowedRoles:
        - os:etcd:backup
      allowedKubernetesNamespaces:
        - kube-system
`
}
