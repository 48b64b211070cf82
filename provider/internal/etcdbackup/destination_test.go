package etcdbackup

import (
	"strings"
	"testing"
)

func TestParseDestination(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		raw           string
		want          string // String() of the destination
		clusterPrefix string // ClusterPrefix("lab")
	}{
		{raw: "file:///var/backups/etcd", want: "file:///var/backups/etcd", clusterPrefix: "lab/"},
		{raw: "file:///var/backups/etcd/", want: "file:///var/backups/etcd", clusterPrefix: "lab/"},
		{raw: "file://localhost/srv", want: "file:///srv", clusterPrefix: "lab/"},
		{raw: "s3://backups", want: "s3://backups", clusterPrefix: "lab/"},
		{raw: "s3://backups/etcd/", want: "s3://backups/etcd", clusterPrefix: "etcd/lab/"},
		{
			raw:           "s3://backups/a/b?s3ForcePathStyle=true&region=us-east-1&endpoint=http://127.0.0.1:7070",
			want:          "s3://backups/a/b?endpoint=http%3A%2F%2F127.0.0.1%3A7070&region=us-east-1&s3ForcePathStyle=true",
			clusterPrefix: "a/b/lab/",
		},
		{raw: "s3://my.bucket-1/p?profile=backup&use_path_style=1&awssdk=v2", want: "s3://my.bucket-1/p?awssdk=v2&profile=backup&use_path_style=1", clusterPrefix: "p/lab/"},
	} {
		d, err := ParseDestination(tc.raw)
		if err != nil {
			t.Errorf("ParseDestination(%q) = %v", tc.raw, err)
			continue
		}

		if d.String() != tc.want || d.ClusterPrefix("lab") != tc.clusterPrefix {
			t.Errorf("ParseDestination(%q) = %s with cluster prefix %s, want %s and %s", tc.raw, d, d.ClusterPrefix("lab"), tc.want, tc.clusterPrefix)
		}
	}
}

// TestParseDestinationRejects: each bad URL fails with a sentence that names the problem, and
// never repeats a secret that was in it.
func TestParseDestinationRejects(t *testing.T) {
	t.Parallel()

	const secret = "wJalrXUtnFEMI"

	for _, tc := range []struct{ raw, want string }{
		{raw: "", want: "is empty"},
		{raw: "/var/backups", want: "has no scheme"},
		{raw: "gs://bucket/prefix", want: `scheme "gs" is not supported: use file:///absolute/dir or s3://bucket/prefix`},
		{raw: "azblob://container", want: `scheme "azblob" is not supported`},
		{raw: "file://relative/dir", want: "is not an absolute path: write three slashes"},
		{raw: "file:relative", want: "is not an absolute path"},
		{raw: "file:///srv?create_dir=1", want: "has query parameters"},
		{raw: "s3:///prefix", want: "names no bucket"},
		{raw: "s3://Bad_Bucket/p", want: "is not a valid bucket name"},
		{raw: "s3://AKIAEXAMPLE:" + secret + "@bucket/p", want: "contains a user name or password"},
		{raw: "s3://bucket/p?endpoint=https://AKIA:" + secret + "@s3.example.com", want: "endpoint contains a user name or password"},
		{raw: "s3://bucket/p?aws_secret_access_key=" + secret, want: `parameter "aws_secret_access_key" is not one s3blob knows`},
		{raw: "s3://bucket/p?endpoint=s3.example.com", want: "is not an http:// or https:// URL"},
		{raw: "s3://bucket/p?endpoint=http://", want: "names no host"},
		{raw: "s3://bucket/p?s3ForcePathStyle=yes", want: `s3ForcePathStyle="yes" is not true or false`},
		{raw: "s3://bucket/p?region=a&region=b", want: `"region" is given 2 times`},
		{raw: "s3://bucket/p?x=1&y=2", want: `"y" is not one s3blob knows`},
		{raw: "s3://bucket/%zz", want: "is not a valid URL"},
	} {
		_, err := ParseDestination(tc.raw)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseDestination(%q) = %v, want an error saying %q", tc.raw, err, tc.want)
			continue
		}

		if strings.Contains(err.Error(), secret) {
			t.Errorf("ParseDestination(%q) = %v: the error repeats the secret", tc.raw, err)
		}
	}
}

// TestObjectURLsRoundTrip: a Location Take gives parses back to the same destination and key.
func TestObjectURLsRoundTrip(t *testing.T) {
	t.Parallel()

	for _, raw := range []string{"file:///srv/backups", "s3://b-1/etcd?endpoint=http%3A%2F%2F127.0.0.1%3A7070&region=us-east-1&s3ForcePathStyle=true", "s3://b-1"} {
		d, err := ParseDestination(raw)
		if err != nil {
			t.Fatal(err)
		}

		key := d.ClusterPrefix("lab") + "etcd-20261127T130509Z-r51.snapshot.age"
		location := d.objectURL(key)

		od, okey, err := parseObjectURL(location)
		if err != nil {
			t.Fatalf("parseObjectURL(%q) = %v", location, err)
		}

		if od.objectURL(okey) != location {
			t.Errorf("%s parses back to %s", location, od.objectURL(okey))
		}

		if d.Scheme == "s3" && (okey != key || od.Bucket != d.Bucket || od.Query.Encode() != d.Query.Encode()) {
			t.Errorf("%s parses to bucket %s key %s query %s, want %s %s %s", location, od.Bucket, okey, od.Query.Encode(), d.Bucket, key, d.Query.Encode())
		}
	}
}
