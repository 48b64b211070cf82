package ccmemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// cluster is pkg/proxmoxpool's ProxmoxCluster.
type cluster struct {
	URL             string `yaml:"url"`
	Insecure        bool   `yaml:"insecure,omitempty"`
	TokenID         string `yaml:"token_id,omitempty"`
	TokenIDFile     string `yaml:"token_id_file,omitempty"`
	TokenSecret     string `yaml:"token_secret,omitempty"`
	TokenSecretFile string `yaml:"token_secret_file,omitempty"`
	Username        string `yaml:"username,omitempty"`
	Password        string `yaml:"password,omitempty"`
	Region          string `yaml:"region,omitempty"`
}

// config is pkg/config's ClustersConfig (the features the emulation reads).
type config struct {
	Features struct {
		HAGroup  bool   `yaml:"ha_group,omitempty"`
		Provider string `yaml:"provider,omitempty"`
		Network  struct {
			Mode string `yaml:"mode,omitempty"`
		} `yaml:"network,omitempty"`
		ForceUpdateLabels bool `yaml:"force_update_labels,omitempty"`
	} `yaml:"features,omitempty"`
	Clusters []*cluster `yaml:"clusters,omitempty"`
}

// readCloudConfig is pkg/config's ReadCloudConfig, with its errors.
func readCloudConfig(data []byte) (config, error) {
	var cfg config

	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&cfg); err != nil {
		return config{}, errors.Join(errors.New("invalid cloud config"), err)
	}

	for idx, c := range cfg.Clusters {
		token := c.TokenID != "" || c.TokenSecret != ""
		tokenFile := c.TokenIDFile != "" || c.TokenSecretFile != ""
		user := c.Username != "" && c.Password != ""

		switch {
		case (token && user) || (tokenFile && user) || (token && tokenFile):
			return config{}, fmt.Errorf("cluster #%d: must specify one of user, token or file credentials, not multiple", idx+1)
		case !token && !tokenFile && !user:
			return config{}, fmt.Errorf("cluster #%d: user, token or file credentials are required", idx+1)
		case c.Region == "":
			return config{}, fmt.Errorf("cluster #%d: missing PVE region in cloud config", idx+1)
		case c.URL == "" || !strings.HasPrefix(c.URL, "http"):
			return config{}, fmt.Errorf("cluster #%d: missing PVE API URL in cloud config", idx+1)
		}
	}

	if cfg.Features.Provider == "" {
		cfg.Features.Provider = "default"
	}

	if cfg.Features.Network.Mode == "" {
		cfg.Features.Network.Mode = "default"
	}

	if !slices.Contains([]string{"default", "qemu", "auto"}, cfg.Features.Network.Mode) {
		return config{}, errors.New("invalid network mode, valid modes are [default qemu auto]")
	}

	return cfg, nil
}

// secretFile is a file of a secret volume: the Secret and the key it comes from.
type secretFile struct {
	namespace, secret, key string
}

// CloudConfigSecret is where Run reads the cloud config of pod's CCM container from: the Secret
// (in the pod's namespace) and its key behind the file the container's --cloud-config names,
// found through the container's volume mounts and the pod's secret or projected volumes. The
// error is why the process would not start (no --cloud-config, no secret volume there, no such
// key projected).
func CloudConfigSecret(pod *corev1.Pod, container corev1.Container) (namespace, secret, key string, err error) {
	f := parseFlags(append(append([]string{}, container.Command...), container.Args...))

	src, err := mountedSecretFile(pod, container, f.cloudConfig)
	if err != nil {
		return "", "", "", err
	}

	return src.namespace, src.secret, src.key, nil
}

// mountedSecretFile finds the Secret and key behind the file at file in container, through its
// volume mounts and the pod's secret (or projected secret) volumes.
func mountedSecretFile(pod *corev1.Pod, container corev1.Container, file string) (secretFile, error) {
	if file == "" {
		return secretFile{}, errors.New("no --cloud-config")
	}

	file = path.Clean(file)

	mounts := slices.Clone(container.VolumeMounts)
	slices.SortFunc(mounts, func(a, b corev1.VolumeMount) int { return len(b.MountPath) - len(a.MountPath) })

	for _, m := range mounts {
		dir := path.Clean(m.MountPath)

		var rel string

		switch {
		case m.SubPath != "" && file == dir:
			rel = m.SubPath
		case strings.HasPrefix(file, dir+"/"):
			rel = path.Join(m.SubPath, strings.TrimPrefix(file, dir+"/"))
		default:
			continue
		}

		i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			return secretFile{}, fmt.Errorf("%s: the pod has no volume %q", file, m.Name)
		}

		if f, ok := volumeFile(pod.Namespace, pod.Spec.Volumes[i].VolumeSource, rel); ok {
			return f, nil
		}

		return secretFile{}, fmt.Errorf("error reading %s: open %s: no such file or directory (volume %q projects no such key)", file, file, m.Name)
	}

	return secretFile{}, fmt.Errorf("error reading %s: open %s: no such file or directory (no secret volume mounted there)", file, file)
}

// volumeFile is the Secret key a secret or projected volume shows at rel.
func volumeFile(namespace string, v corev1.VolumeSource, rel string) (secretFile, bool) {
	var sources []*corev1.SecretProjection

	if s := v.Secret; s != nil {
		sources = append(sources, &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: s.SecretName}, Items: s.Items,
		})
	}

	if p := v.Projected; p != nil {
		for _, src := range p.Sources {
			if src.Secret != nil {
				sources = append(sources, src.Secret)
			}
		}
	}

	for _, s := range sources {
		if len(s.Items) == 0 {
			if !strings.Contains(rel, "/") {
				return secretFile{namespace: namespace, secret: s.Name, key: rel}, true
			}

			continue
		}

		for _, it := range s.Items {
			if path.Clean(it.Path) == rel {
				return secretFile{namespace: namespace, secret: s.Name, key: it.Key}, true
			}
		}
	}

	return secretFile{}, false
}

// waitConfig reads and checks the cloud config as the process does at every start, watching the
// Secret: until it reads one the CCM accepts, the container "crash-loops" (the reason is logged
// once per change). false: ctx ended first.
func waitConfig(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, container corev1.Container, file string,
	say func(string, ...any),
) (config, bool) {
	src, err := mountedSecretFile(pod, container, file)
	if err != nil {
		say("not starting: %v", err)
		<-ctx.Done()

		return config{}, false
	}

	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(src.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", src.secret).String()
		}))
	inf := factory.Core().V1().Secrets().Informer()

	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}

	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, obj any) { poke(obj) }, DeleteFunc: poke,
	})

	ctx, cancel := context.WithCancel(ctx)
	factory.Start(ctx.Done())

	defer func() {
		cancel()
		factory.Shutdown()
	}()

	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return config{}, false
	}

	poke(nil)

	last := ""

	for {
		select {
		case <-ctx.Done():
			return config{}, false
		case <-changed:
		}

		cfg, err := configFrom(inf.GetStore(), src)
		if err == nil {
			return cfg, true
		}

		if msg := err.Error(); msg != last {
			last = msg
			say("crash-looping: %v", err)
		}
	}
}

// configFrom reads the config file from the Secret in store.
func configFrom(store cache.Store, src secretFile) (config, error) {
	obj, ok, _ := store.GetByKey(src.namespace + "/" + src.secret)

	secret, isSecret := obj.(*corev1.Secret)
	if !ok || !isSecret {
		return config{}, fmt.Errorf("MountVolume.SetUp failed: secret %q not found", src.secret)
	}

	data, ok := secret.Data[src.key]
	if !ok {
		if s, inString := secret.StringData[src.key]; inString {
			data = []byte(s)
		} else {
			return config{}, fmt.Errorf("MountVolume.SetUp failed: references non-existent secret key: %s", src.key)
		}
	}

	cfg, err := readCloudConfig(data)
	if err != nil {
		return config{}, fmt.Errorf("failed to read config: %w", err)
	}

	if len(cfg.Clusters) == 0 {
		return config{}, errors.New("cloud provider could not be initialized: clusters not found")
	}

	for _, c := range cfg.Clusters {
		if c.TokenID == "" || c.TokenSecret == "" {
			return config{}, fmt.Errorf("region %s: only token_id and token_secret credentials are emulated", c.Region)
		}
	}

	return cfg, nil
}
