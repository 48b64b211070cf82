package etcdbackup

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/s3blob"
)

// allowedForms is what every destination error ends with, so a user sees the forms that work.
const allowedForms = "use file:///absolute/dir or s3://bucket/prefix?endpoint=https://host:port&region=…&s3ForcePathStyle=true"

// Destination is where a cluster's snapshots are kept: a local directory (file://) or an S3 bucket
// (s3://), in the URL forms Pulumi's state backends use. Its credentials never come from the URL:
// S3 reads them from the standard AWS environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_PROFILE, shared config files).
type Destination struct {
	// Scheme is "file" or "s3".
	Scheme string
	// Bucket is the S3 bucket; empty for file://.
	Bucket string
	// Dir is the absolute directory of a file:// destination; empty for s3://.
	Dir string
	// Prefix is the S3 key prefix (no leading or trailing slash, may be empty); always empty for
	// file:// (the directory is the root).
	Prefix string
	// Query holds the s3blob parameters (endpoint, region, s3ForcePathStyle, …).
	Query url.Values
}

// s3Params are the query parameters gocloud.dev/blob/s3blob v0.47.0 and its AWS configuration
// (gocloud.dev/aws.V2ConfigFromURLParams) accept; any other parameter makes s3blob fail.
var s3Params = []string{
	"accelerate", "anonymous", "awssdk", "disable_https", "dualstack", "endpoint", "fips",
	"hostname_immutable", "kmskeyid", "profile", "rate_limiter_capacity", "region",
	"request_checksum_calculation", "response_checksum_validation", "role", "s3ForcePathStyle",
	"ssetype", "use_path_style",
}

// s3BoolParams are the parameters whose value s3blob parses as a boolean.
var s3BoolParams = []string{"accelerate", "anonymous", "disable_https", "dualstack", "fips", "hostname_immutable", "s3ForcePathStyle", "use_path_style"}

// bucketName is what S3 allows as a bucket name (3–63 lowercase letters, digits, dots, hyphens).
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// ParseDestination reads a destination URL and checks it without touching the network: the scheme
// is file or s3, a file path is absolute, an S3 URL names a bucket, carries no credentials and
// only the query parameters s3blob knows. Errors never repeat the URL's user information.
func ParseDestination(raw string) (Destination, error) {
	u, err := parseURL(raw)
	if err != nil {
		return Destination{}, err
	}

	switch u.Scheme {
	case "file":
		return parseFile(u)
	case "s3":
		return parseS3(u)
	default:
		return Destination{}, fmt.Errorf("destination scheme %q is not supported: %s", u.Scheme, allowedForms)
	}
}

// parseURL parses raw and rejects credentials in it, without ever echoing them.
func parseURL(raw string) (*url.URL, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, errors.New("the destination is empty: " + allowedForms)
	}

	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the URL, password included: say only what kind of problem it is.
		return nil, errors.New("the destination is not a valid URL: " + allowedForms)
	}

	if u.User != nil {
		return nil, errors.New("the destination URL contains a user name or password: remove it; " +
			"S3 credentials come only from the AWS environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)")
	}

	if u.Scheme == "" {
		return nil, errors.New("the destination has no scheme: " + allowedForms)
	}

	return u, nil
}

func parseFile(u *url.URL) (Destination, error) {
	if u.Host != "" && u.Host != "localhost" {
		return Destination{}, fmt.Errorf("file destination %q is not an absolute path: write three slashes, file:///absolute/dir", u.Redacted())
	}

	if u.Path == "" || !path.IsAbs(u.Path) {
		return Destination{}, fmt.Errorf("file destination %q is not an absolute path: write three slashes, file:///absolute/dir", u.Redacted())
	}

	if len(u.Query()) > 0 {
		return Destination{}, fmt.Errorf("file destination %q has query parameters, which file destinations do not take: remove them", u.Redacted())
	}

	return Destination{Scheme: "file", Dir: path.Clean(u.Path)}, nil
}

func parseS3(u *url.URL) (Destination, error) {
	if u.Host == "" {
		return Destination{}, errors.New("s3 destination names no bucket: write s3://bucket/prefix")
	}

	if !bucketName.MatchString(u.Host) {
		return Destination{}, fmt.Errorf("s3 bucket %q is not a valid bucket name (3–63 lowercase letters, digits, dots and hyphens)", u.Host)
	}

	q := u.Query()

	var problems []error

	for _, k := range sortedKeys(q) {
		switch {
		case !slices.Contains(s3Params, k):
			problems = append(problems, fmt.Errorf("s3 destination parameter %q is not one s3blob knows (known: %s)", k, strings.Join(s3Params, ", ")))
		case len(q[k]) > 1:
			problems = append(problems, fmt.Errorf("s3 destination parameter %q is given %d times: give it once", k, len(q[k])))
		case slices.Contains(s3BoolParams, k):
			if _, err := strconv.ParseBool(q.Get(k)); err != nil {
				problems = append(problems, fmt.Errorf("s3 destination parameter %s=%q is not true or false", k, q.Get(k)))
			}
		case k == "endpoint":
			if err := checkEndpoint(q.Get(k)); err != nil {
				problems = append(problems, err)
			}
		}
	}

	if err := errors.Join(problems...); err != nil {
		return Destination{}, err
	}

	return Destination{Scheme: "s3", Bucket: u.Host, Prefix: strings.Trim(path.Clean("/"+u.Path), "/"), Query: q}, nil
}

// checkEndpoint checks an S3 endpoint parameter; it names the endpoint only when it carries no
// user information.
func checkEndpoint(raw string) error {
	e, err := url.Parse(raw)
	if err != nil {
		return errors.New("s3 destination parameter endpoint is not a URL: write endpoint=https://host:port")
	}

	switch {
	case e.User != nil:
		return errors.New("s3 destination parameter endpoint contains a user name or password: remove it; " +
			"credentials come only from the AWS environment")
	case e.Scheme != "http" && e.Scheme != "https":
		return fmt.Errorf("s3 destination parameter endpoint %q is not an http:// or https:// URL", raw)
	case e.Host == "":
		return fmt.Errorf("s3 destination parameter endpoint %q names no host", raw)
	}

	return nil
}

func sortedKeys(q url.Values) []string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}

	sort.Strings(keys)

	return keys
}

// String is the destination as a URL (no credentials: it never had any).
func (d Destination) String() string {
	return d.objectURL("")
}

// ClusterPrefix is the key prefix under which a cluster's snapshots live: "<prefix>/<cluster>/".
func (d Destination) ClusterPrefix(cluster string) string {
	if d.Prefix == "" {
		return cluster + "/"
	}

	return d.Prefix + "/" + cluster + "/"
}

// objectURL is the URL of the object at key (the destination itself for an empty key).
func (d Destination) objectURL(key string) string {
	switch d.Scheme {
	case "file":
		return (&url.URL{Scheme: "file", Path: path.Join(d.Dir, key)}).String()
	default:
		p := d.Prefix
		if key != "" {
			p = key
		}

		u := url.URL{Scheme: "s3", Host: d.Bucket, RawQuery: d.Query.Encode()}
		if p != "" {
			u.Path = "/" + p
		}

		return u.String()
	}
}

// open opens the destination's bucket. A file destination's directory is created when missing;
// writes go through a temporary file in the target directory, renamed when complete.
func (d Destination) open(ctx context.Context) (*blob.Bucket, error) {
	switch d.Scheme {
	case "file":
		b, err := fileblob.OpenBucket(d.Dir, &fileblob.Options{CreateDir: true, NoTempDir: true})
		if err != nil {
			return nil, fmt.Errorf("opening the directory %s: %w", d.Dir, err)
		}

		return b, nil
	case "s3":
		u := url.URL{Scheme: "s3", Host: d.Bucket, RawQuery: d.Query.Encode()}

		b, err := (&s3blob.URLOpener{}).OpenBucketURL(ctx, &u)
		if err != nil {
			return nil, fmt.Errorf("opening the bucket %s: %w", d.Bucket, err)
		}

		return b, nil
	default:
		return nil, fmt.Errorf("destination scheme %q is not supported: %s", d.Scheme, allowedForms)
	}
}

// parseObjectURL splits the full URL of one object (as Info.Location gives it) into its
// destination and key.
func parseObjectURL(raw string) (Destination, string, error) {
	d, err := ParseDestination(raw)
	if err != nil {
		return Destination{}, "", err
	}

	switch d.Scheme {
	case "file":
		dir, key := path.Split(d.Dir)
		if key == "" || dir == "" {
			return Destination{}, "", fmt.Errorf("%s names a directory, not a snapshot file", d)
		}

		d.Dir = path.Clean(dir)

		return d, key, nil
	default:
		if d.Prefix == "" {
			return Destination{}, "", fmt.Errorf("%s names a bucket, not a snapshot object: write s3://bucket/path/to/object", d)
		}

		key := d.Prefix
		d.Prefix = ""

		return d, key, nil
	}
}

// CheckObjectURL checks, without touching the network, that raw names one object in the forms
// Take's Location has (file:///dir/name or s3://bucket/key?…): for a preview's input check.
func CheckObjectURL(raw string) error {
	_, _, err := parseObjectURL(raw)

	return err
}
