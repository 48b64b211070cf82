package etcdbackup

import (
	"strings"
	"testing"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/golden"
	"sigs.k8s.io/yaml"
)

// A fixed X25519 recipient for the golden files (its identity is not kept anywhere).
const goldenRecipient = "age1khpnnl86pzx96ttyjmldptsl5yn2v9jgmmzcjcufvk00ttkph9zs0ytgec"

func mustDestination(t *testing.T, raw string) Destination {
	t.Helper()

	d, err := ParseDestination(raw)
	if err != nil {
		t.Fatal(err)
	}

	return d
}

// TestCronJobManifests renders twice (byte-stable) and compares with the golden files; every
// document must be YAML.
func TestCronJobManifests(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		opts CronJobOptions
	}{
		{name: "cronjob-encrypted-path-style.yaml", opts: CronJobOptions{
			ClusterName: "lab",
			Destination: mustDestination(t, "s3://talos-backups/clusters?endpoint=http://minio.storage:9000&region=us-east-1&s3ForcePathStyle=true"),
			Schedule:    "0 */6 * * *", Recipients: []string{goldenRecipient}, CredentialsSecret: "etcd-backup-s3",
		}},
		{name: "cronjob-aws-unencrypted.yaml", opts: CronJobOptions{
			ClusterName: "prod", Destination: mustDestination(t, "s3://talos-backups?region=eu-central-1"),
			Schedule: "@daily", CredentialsSecret: "aws", Image: "registry.example.com/talos-backup:v0.1.0-beta.3",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			first, err := CronJobManifests(tc.opts)
			if err != nil {
				t.Fatal(err)
			}

			again, _ := CronJobManifests(tc.opts)
			if again != first {
				t.Fatal("two renders of the same options differ")
			}

			for i, doc := range strings.Split(first, "\n---\n") {
				var obj map[string]any
				if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj["kind"] == nil {
					t.Errorf("document %d is not a Kubernetes object: %v", i, err)
				}
			}

			golden.Check(t, tc.name, first)
		})
	}
}

func TestCronJobManifestsRejects(t *testing.T) {
	t.Parallel()

	s3 := mustDestination(t, "s3://b-1/p?region=us-east-1")
	good := CronJobOptions{ClusterName: "lab", Destination: s3, Schedule: "0 * * * *", CredentialsSecret: "s3"}

	for _, tc := range []struct {
		name   string
		change func(*CronJobOptions)
		want   []string
	}{
		{name: "a file destination", change: func(o *CronJobOptions) { o.Destination = mustDestination(t, "file:///srv") }, want: []string{"is a local directory"}},
		{name: "no region", change: func(o *CronJobOptions) { o.Destination = mustDestination(t, "s3://b-1/p") }, want: []string{"need the destination's region"}},
		{name: "two recipients", change: func(o *CronJobOptions) { o.Recipients = []string{goldenRecipient, goldenRecipient} }, want: []string{"one recipient"}},
		{name: "a bad recipient", change: func(o *CronJobOptions) { o.Recipients = []string{"age1x"} }, want: []string{"recipients[0]"}},
		{
			name:   "everything at once",
			change: func(o *CronJobOptions) { o.Schedule, o.CredentialsSecret, o.ClusterName = "hourly", "AWS_Creds", "" },
			want:   []string{`schedule "hourly"`, `credentialsSecret "AWS_Creds"`, `cluster name ""`},
		},
	} {
		opts := good
		tc.change(&opts)

		_, err := CronJobManifests(opts)
		for _, want := range tc.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: CronJobManifests = %v, want it to say %q", tc.name, err, want)
			}
		}
	}

	if _, err := CronJobManifests(good); err != nil {
		t.Errorf("the good options fail: %v", err)
	}
}

func TestTalosAPIAccessPatch(t *testing.T) {
	t.Parallel()

	var patch struct {
		Machine struct {
			Features struct {
				Access struct {
					Enabled    bool     `json:"enabled"`
					Roles      []string `json:"allowedRoles"`
					Namespaces []string `json:"allowedKubernetesNamespaces"`
				} `json:"kubernetesTalosAPIAccess"`
			} `json:"features"`
		} `json:"machine"`
	}

	if err := yaml.UnmarshalStrict([]byte(TalosAPIAccessPatch()), &patch); err != nil {
		t.Fatal(err)
	}

	a := patch.Machine.Features.Access
	if !a.Enabled || len(a.Roles) != 1 || a.Roles[0] != "os:etcd:backup" || len(a.Namespaces) != 1 || a.Namespaces[0] != BackupNamespace {
		t.Errorf("the patch allows %+v, want os:etcd:backup from %s", a, BackupNamespace)
	}
}
