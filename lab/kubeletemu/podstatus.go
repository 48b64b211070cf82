package kubeletemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// markPending acknowledges a pod that cannot start yet (its node's network is not ready): phase
// Pending with the host IP and start time, containers waiting in ContainerCreating, as a kubelet
// reports while the sandbox cannot be created. Only the first time: nothing changes after.
func (k *Kubelet) markPending(ctx context.Context, pod *corev1.Pod) error {
	if pod.Status.StartTime != nil {
		return nil
	}

	pod = pod.DeepCopy()
	now := metav1.Now()
	s := &pod.Status

	s.Phase = corev1.PodPending
	s.HostIP, s.HostIPs = k.opts.InternalIP, []corev1.HostIP{{IP: k.opts.InternalIP}}
	s.StartTime = &now
	s.ObservedGeneration = pod.Generation

	initialized := condition(corev1.PodInitialized, true, "", "")
	waiting := "ContainerCreating"

	if len(pod.Spec.InitContainers) > 0 {
		var names []string
		for _, c := range pod.Spec.InitContainers {
			names = append(names, c.Name)
		}

		initialized = condition(corev1.PodInitialized, false, "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(names, " ")))
		waiting = "PodInitializing"
	}

	notReady := fmt.Sprintf("containers with unready status: [%s]", strings.Join(containerNames(pod), " "))
	k.setConditions(pod, now,
		condition(corev1.PodReadyToStartContainers, false, "", ""),
		initialized,
		condition(corev1.PodReady, false, "ContainersNotReady", notReady),
		condition(corev1.ContainersReady, false, "ContainersNotReady", notReady),
	)

	s.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		s.InitContainerStatuses = append(s.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}},
		})
	}

	s.ContainerStatuses = nil
	for _, c := range sortedContainers(pod) {
		s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Started: ptr.To(false), State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting}},
		})
	}

	_, err := k.opts.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})

	return err
}

// markRunning reports the pod's containers started and ready (init containers completed, sidecar
// init containers running): phase Running, pod IP (the node's for host-network pods), host IP.
// What a previous report set (start times, IPs, container IDs) is kept.
func (k *Kubelet) markRunning(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	pod = pod.DeepCopy()
	now := metav1.Now()
	s := &pod.Status

	ip := k.opts.InternalIP
	if !pod.Spec.HostNetwork {
		ip = k.podIP(pod)
	}

	s.Phase = corev1.PodRunning
	s.HostIP, s.HostIPs = k.opts.InternalIP, []corev1.HostIP{{IP: k.opts.InternalIP}}
	s.PodIP, s.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	s.ObservedGeneration = pod.Generation

	if s.StartTime == nil {
		s.StartTime = &now
	}

	ready := condition(corev1.PodReady, true, "", "")
	if gates := unreadyGates(pod); len(gates) > 0 {
		ready = condition(corev1.PodReady, false, "ReadinessGatesNotReady", "corresponding condition of pod readiness gate "+strings.Join(gates, ", ")+" does not exist.")
	}

	k.setConditions(pod, now,
		condition(corev1.PodReadyToStartContainers, true, "", ""),
		condition(corev1.PodInitialized, true, "", ""),
		ready,
		condition(corev1.ContainersReady, true, "", ""),
	)

	old := s.InitContainerStatuses
	s.InitContainerStatuses = nil

	for _, c := range pod.Spec.InitContainers {
		st := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), ContainerID: containerID(pod, c.Name)}

		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			st.Ready, st.Started = true, ptr.To(true)
			st.State.Running = &corev1.ContainerStateRunning{StartedAt: startedAt(old, c, now)}
		} else {
			st.Started = ptr.To(false)
			st.State.Terminated = &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: startedAt(old, c, now), FinishedAt: now, ContainerID: st.ContainerID,
			}

			if prev := findStatus(old, c.Name); prev != nil && prev.State.Terminated != nil {
				st.State.Terminated.FinishedAt = prev.State.Terminated.FinishedAt
			}
		}

		s.InitContainerStatuses = append(s.InitContainerStatuses, st)
	}

	old = s.ContainerStatuses
	s.ContainerStatuses = nil

	for _, c := range sortedContainers(pod) {
		st := corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), ContainerID: containerID(pod, c.Name),
			Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: startedAt(old, c, now)}},
		}

		if prev := findStatus(old, c.Name); prev != nil {
			st.RestartCount = prev.RestartCount
		}

		s.ContainerStatuses = append(s.ContainerStatuses, st)
	}

	return k.opts.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

// markTerminated reports a deleted pod's containers stopped (exit code 0), the pod Succeeded.
func (k *Kubelet) markTerminated(ctx context.Context, pod *corev1.Pod) error {
	pod = pod.DeepCopy()
	now := metav1.Now()
	s := &pod.Status

	s.Phase = corev1.PodSucceeded
	s.ObservedGeneration = pod.Generation
	k.setConditions(pod, now,
		condition(corev1.PodReadyToStartContainers, false, "", ""),
		condition(corev1.PodInitialized, true, "PodCompleted", ""),
		condition(corev1.PodReady, false, "PodCompleted", ""),
		condition(corev1.ContainersReady, false, "PodCompleted", ""),
	)

	terminate := func(statuses []corev1.ContainerStatus) {
		for i := range statuses {
			st := &statuses[i]
			if st.State.Terminated != nil {
				continue
			}

			started := now
			if st.State.Running != nil {
				started = st.State.Running.StartedAt
			}

			st.Ready, st.Started = false, ptr.To(false)
			st.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: now, ContainerID: st.ContainerID,
			}}
		}
	}

	terminate(s.InitContainerStatuses)
	terminate(s.ContainerStatuses)

	_, err := k.opts.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})

	return err
}

// setConditions sets the kubelet's pod conditions, in the kubelet's order, keeping each one's
// transition time while its status holds; PodScheduled (the scheduler's) is kept, or set True
// for a pod bound without the scheduler.
func (k *Kubelet) setConditions(pod *corev1.Pod, now metav1.Time, conds ...corev1.PodCondition) {
	old := pod.Status.Conditions
	find := func(t corev1.PodConditionType) *corev1.PodCondition {
		if i := slices.IndexFunc(old, func(c corev1.PodCondition) bool { return c.Type == t }); i >= 0 {
			return &old[i]
		}

		return nil
	}

	conds = append(conds, condition(corev1.PodScheduled, true, "", ""))
	out := make([]corev1.PodCondition, 0, len(conds)+len(old))

	for _, c := range conds {
		c.LastTransitionTime = now
		c.ObservedGeneration = pod.Generation

		if prev := find(c.Type); prev != nil && prev.Status == c.Status {
			if c.Type == corev1.PodScheduled {
				c = *prev
			}

			c.LastTransitionTime = prev.LastTransitionTime
		}

		out = append(out, c)
	}

	// Conditions others own (readiness gates', DisruptionTarget) stay.
	for _, c := range old {
		if !slices.ContainsFunc(out, func(o corev1.PodCondition) bool { return o.Type == c.Type }) {
			out = append(out, c)
		}
	}

	pod.Status.Conditions = out
}

// needsRunningStatus reports whether a pod's status differs from what a kubelet running it
// reports: not Running, readiness not as its readiness gates say, containers not all running with
// their spec's images, or no IPs.
func needsRunningStatus(pod *corev1.Pod) bool {
	s := pod.Status
	if s.Phase != corev1.PodRunning || s.HostIP == "" || s.PodIP == "" || podReady(pod) != (len(unreadyGates(pod)) == 0) {
		return true
	}

	if len(s.ContainerStatuses) != len(pod.Spec.Containers) {
		return true
	}

	for _, c := range pod.Spec.Containers {
		st := findStatus(s.ContainerStatuses, c.Name)
		if st == nil || st.Image != c.Image || st.State.Running == nil || !st.Ready {
			return true
		}
	}

	return false
}

// runningAndReady reports whether the pod runs and is ready.
func runningAndReady(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && podReady(pod)
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}

	return false
}

// unreadyGates are the pod's readiness gates whose conditions are not True.
func unreadyGates(pod *corev1.Pod) []string {
	var out []string

	for _, g := range pod.Spec.ReadinessGates {
		ok := slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == g.ConditionType && c.Status == corev1.ConditionTrue
		})
		if !ok {
			out = append(out, string(g.ConditionType))
		}
	}

	return out
}

func condition(t corev1.PodConditionType, status bool, reason, message string) corev1.PodCondition {
	c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: message}
	if status {
		c.Status = corev1.ConditionTrue
	}

	return c
}

// sortedContainers are the pod's containers sorted by name, the order of the kubelet's statuses.
func sortedContainers(pod *corev1.Pod) []corev1.Container {
	cs := slices.Clone(pod.Spec.Containers)
	slices.SortFunc(cs, func(a, b corev1.Container) int { return strings.Compare(a.Name, b.Name) })

	return cs
}

func containerNames(pod *corev1.Pod) []string {
	var names []string
	for _, c := range sortedContainers(pod) {
		names = append(names, c.Name)
	}

	return names
}

func findStatus(statuses []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	if i := slices.IndexFunc(statuses, func(s corev1.ContainerStatus) bool { return s.Name == name }); i >= 0 {
		return &statuses[i]
	}

	return nil
}

// startedAt is when the container started: as reported before, if it ran the same image.
func startedAt(old []corev1.ContainerStatus, c corev1.Container, now metav1.Time) metav1.Time {
	if prev := findStatus(old, c.Name); prev != nil && prev.Image == c.Image {
		switch {
		case prev.State.Running != nil:
			return prev.State.Running.StartedAt
		case prev.State.Terminated != nil:
			return prev.State.Terminated.StartedAt
		}
	}

	return now
}

// imageID is a digest reference for image, as containerd reports it.
func imageID(image string) string {
	repo := image
	if i := strings.LastIndex(repo, "@"); i >= 0 {
		repo = repo[:i]
	} else if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}

	sum := sha256.Sum256([]byte(image))

	return repo + "@sha256:" + hex.EncodeToString(sum[:])
}

// containerID is a stable containerd ID for one container of the pod.
func containerID(pod *corev1.Pod, name string) string {
	sum := sha256.Sum256([]byte(string(pod.UID) + "/" + pod.Namespace + "/" + pod.Name + "/" + name))

	return "containerd://" + hex.EncodeToString(sum[:])
}
