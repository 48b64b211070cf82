package ccmemu

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// monitorNodes is the cloud node lifecycle controller's MonitorNodes.
func (c *ccm) monitorNodes(ctx context.Context) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}

	for _, n := range nodes {
		if ctx.Err() != nil {
			return
		}

		node := n.DeepCopy()

		if nodeReady(node) {
			if hasTaint(node, ShutdownTaint) {
				c.setShutdownTaint(ctx, node.Name, false)
			}

			continue
		}

		exists, err := c.instanceExists(ctx, node)
		if err != nil {
			c.say("error checking if node %s exists: %v", node.Name, err)

			continue
		}

		if !exists {
			c.say("deleting node since it is no longer present in cloud provider: %s", node.Name)

			err := c.client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				c.say("unable to delete node %q: %v", node.Name, err)
			}

			continue
		}

		shutdown, err := c.instanceShutdown(ctx, node)
		if err != nil {
			c.say("error checking if node %s is shutdown: %v", node.Name, err)

			continue
		}

		if shutdown && !hasTaint(node, ShutdownTaint) {
			c.setShutdownTaint(ctx, node.Name, true)
		}
	}
}

func (c *ccm) setShutdownTaint(ctx context.Context, name string, on bool) {
	err := c.patchNode(ctx, name, func(n *corev1.Node) {
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == ShutdownTaint })
		if on {
			now := metav1.Now()
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: ShutdownTaint, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &now})
		}
	})
	if err != nil && !apierrors.IsNotFound(err) {
		c.say("error patching node taints of %s: %v", name, err)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}

	return false
}
