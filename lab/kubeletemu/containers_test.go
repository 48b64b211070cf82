package kubeletemu_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/talos-proxmox/pulumi-talos-proxmox/lab/kubeletemu"
)

func TestImageRepository(t *testing.T) {
	t.Parallel()

	for image, want := range map[string]string{
		"ghcr.io/org/app:v1":                  "ghcr.io/org/app",
		"ghcr.io/org/app":                     "ghcr.io/org/app",
		"ghcr.io/org/app:v1@sha256:0123abcd":  "ghcr.io/org/app",
		"ghcr.io/org/app@sha256:0123abcd":     "ghcr.io/org/app",
		"registry.lab:5000/org/app":           "registry.lab:5000/org/app",
		"registry.lab:5000/org/app:v0.13.1-1": "registry.lab:5000/org/app",
	} {
		if got := kubeletemu.ImageRepository(image); got != want {
			t.Errorf("%s: %q, want %q", image, got, want)
		}
	}
}

// event is a ContainerFunc starting or returning.
type event struct {
	pod     string
	started bool
}

// A ContainerFunc runs while its pod runs: from when the kubelet marks it Running until the pod
// is being deleted (gracefully or at once) or the kubelet stops; only for containers of its image.
func TestContainersRunWhileTheirPodRuns(t *testing.T) {
	t.Parallel()

	client := fake.NewClientset()
	events := make(chan event, 16)

	k, err := kubeletemu.Start(t.Context(), kubeletemu.Options{
		Client: client, NodeName: "w-1", InternalIP: "127.0.9.3", KubeletVersion: "v1.34.1", HeartbeatInterval: 50 * time.Millisecond,
		Containers: map[string]kubeletemu.ContainerFunc{
			"example.com/ctl": func(ctx context.Context, _ kubernetes.Interface, pod *corev1.Pod, c corev1.Container) {
				if pod.Status.Phase != corev1.PodRunning || c.Name != "ctl" {
					t.Errorf("started for %s in phase %s", c.Name, pod.Status.Phase)
				}

				events <- event{pod.Name, true}
				<-ctx.Done()
				events <- event{pod.Name, false}
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	defer k.Stop()

	for _, name := range []string{"graceful", "at-once", "until-stop"} {
		_, err := client.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{NodeName: "w-1", HostNetwork: true, Containers: []corev1.Container{
				{Name: "sidecar", Image: "example.com/other:v1"},
				{Name: "ctl", Image: "example.com/ctl:v1@sha256:0123abcd"},
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}

		if e := next(t, events); e != (event{name, true}) {
			t.Fatalf("%+v, want %s started", e, name)
		}
	}

	// A graceful deletion (what the API server does with a grace period): the container stops at
	// once, then the kubelet removes the pod.
	pod, err := client.CoreV1().Pods("default").Get(t.Context(), "graceful", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	now := metav1.Now()
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &now, ptr.To[int64](30)

	if _, err := client.CoreV1().Pods("default").Update(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	if e := next(t, events); e != (event{"graceful", false}) {
		t.Fatalf("%+v, want graceful stopped", e)
	}

	if err := client.CoreV1().Pods("default").Delete(t.Context(), "at-once", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	if e := next(t, events); e != (event{"at-once", false}) {
		t.Fatalf("%+v, want at-once stopped", e)
	}

	// Stop returns once the containers have.
	k.Stop()

	select {
	case e := <-events:
		if e != (event{"until-stop", false}) {
			t.Fatalf("%+v, want until-stop stopped", e)
		}
	default:
		t.Fatal("the kubelet stopped before its container")
	}
}

func next(t *testing.T, events <-chan event) event {
	t.Helper()

	select {
	case e := <-events:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no container started or stopped")
	}

	return event{}
}
