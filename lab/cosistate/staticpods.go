package cosistate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const ownerStaticPods = "k8s.KubeletStaticPodController"

// StaticPod is a static pod the kubelet runs from Talos' manifests (kube-apiserver,
// kube-controller-manager, kube-scheduler on control planes).
type StaticPod struct {
	// Name is the static pod's name; its status is published as "kube-system/<Name>-<nodename>",
	// the mirror pod's name, which Talos' health check matches by prefix.
	Name string
	// Image of its single container, named like the pod.
	Image string
	// Ready: its container is running and ready. A pod in phase Running that is not ready makes
	// machined report the "staticPods" unmet condition.
	Ready bool
	// Phase overrides the pod phase; empty means Running.
	Phase corev1.PodPhase
	// HostIP is the node's address (static pods use the host network); optional.
	HostIP string
}

// podRecord remembers when a pod started and last changed readiness, so that republishing an
// unchanged pod changes nothing.
type podRecord struct {
	pod          StaticPod
	started      time.Time
	readyChanged time.Time
}

// SetStaticPods replaces the static pods' statuses (k8s.StaticPodStatus in namespace k8s), whose
// pod status is the kubelet's v1.PodStatus as machined copies it. It needs the nodename (see
// SetNodename) unless pods is empty. A pod whose image changes counts as restarted.
func (s *State) SetStaticPods(pods []StaticPod) error {
	s.mu.Lock()
	defer s.mu.Unlock()

	if len(pods) > 0 && s.nodename == "" {
		return errors.New("cosistate: static pods need the nodename (SetNodename)")
	}

	now := time.Now().UTC().Truncate(time.Second)
	next := make(map[string]*podRecord, len(pods))

	for _, p := range pods {
		if p.Name == "" {
			return errors.New("cosistate: a static pod needs a name")
		}

		rec, ok := s.pods[p.Name]

		switch {
		case !ok || rec.pod.Image != p.Image:
			rec = &podRecord{started: now, readyChanged: now}
		case rec.pod.Ready != p.Ready || rec.pod.Phase != p.Phase:
			rec = &podRecord{started: rec.started, readyChanged: now}
		default:
			rec = &podRecord{started: rec.started, readyChanged: rec.readyChanged}
		}

		rec.pod = p
		next[p.Name] = rec
	}

	s.pods = next

	return s.publishPodsLocked()
}

// publishPodsLocked writes the current static pods under the current nodename and removes the
// statuses of others.
func (s *State) publishPodsLocked() error {
	keep := map[resource.ID]bool{}

	if s.nodename != "" {
		names := make([]string, 0, len(s.pods))
		for name := range s.pods {
			names = append(names, name)
		}

		sort.Strings(names)

		for _, name := range names {
			rec := s.pods[name]
			id := "kube-system/" + name + "-" + s.nodename
			keep[id] = true

			podStatus, err := rec.status()
			if err != nil {
				return fmt.Errorf("cosistate: static pod %s: %w", name, err)
			}

			sp := k8s.NewStaticPodStatus(k8s.NamespaceName, id)
			sp.TypedSpec().PodStatus = podStatus

			if err := put(s, sp, ownerStaticPods); err != nil {
				return err
			}
		}
	}

	return s.prune(k8s.NewStaticPodStatus(k8s.NamespaceName, "").Metadata(), ownerStaticPods, keep)
}

// status renders the kubelet's pod status and converts it as machined does (JSON into a map).
func (rec *podRecord) status() (map[string]any, error) {
	p := rec.pod

	phase := p.Phase
	if phase == "" {
		phase = corev1.PodRunning
	}

	started, changed := metav1.NewTime(rec.started), metav1.NewTime(rec.readyChanged)
	running := phase == corev1.PodRunning
	ready := running && p.Ready

	cond := func(t corev1.PodConditionType, ok bool, at metav1.Time) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, LastTransitionTime: at}
		if ok {
			c.Status = corev1.ConditionTrue
		} else if t == corev1.PodReady || t == corev1.ContainersReady {
			c.Reason = "ContainersNotReady"
			c.Message = "containers with unready status: [" + p.Name + "]"
		}

		return c
	}

	cs := corev1.ContainerStatus{
		Name:         p.Name,
		Image:        p.Image,
		ImageID:      imageID(p.Image),
		Ready:        ready,
		RestartCount: 0,
	}

	if running {
		cs.ContainerID = "containerd://" + digest(p.Name, rec.started.String())
		cs.Started = &running
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: started}
	} else {
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	}

	st := corev1.PodStatus{
		Phase: phase,
		Conditions: []corev1.PodCondition{
			cond(corev1.PodReadyToStartContainers, running, started),
			cond(corev1.PodInitialized, true, started),
			cond(corev1.PodReady, ready, changed),
			cond(corev1.ContainersReady, ready, changed),
			cond(corev1.PodScheduled, true, started),
		},
		StartTime:         &started,
		ContainerStatuses: []corev1.ContainerStatus{cs},
		QOSClass:          corev1.PodQOSBurstable,
	}

	if p.HostIP != "" {
		st.HostIP, st.HostIPs = p.HostIP, []corev1.HostIP{{IP: p.HostIP}}
		st.PodIP, st.PodIPs = p.HostIP, []corev1.PodIP{{IP: p.HostIP}}
	}

	raw, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encoding the pod status: %w", err)
	}

	out := map[string]any{}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decoding the pod status: %w", err)
	}

	return out, nil
}

// imageID is a stable digest reference for image, as containerd reports a pulled image.
func imageID(image string) string {
	repo := image
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repo = image[:i]
	}

	return repo + "@sha256:" + digest(image)
}

func digest(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))

	return hex.EncodeToString(h[:])
}
