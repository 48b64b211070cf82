package spec

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// TaintEffects are the effects a Kubernetes taint can have.
var TaintEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

// controlPlaneTaint is the taint Talos sets on control planes unless allowSchedulingOnControlPlanes.
const controlPlaneTaint = "node-role.kubernetes.io/control-plane"

// parseTaints checks the taints at path, written as kubectl does (`key=value:Effect`, or
// `key:Effect` without a value), and returns them as Talos' nodeTaints holds them: by key,
// "value:Effect" (or "Effect"). Talos keeps one taint per key.
func parseTaints(p *problems, path string, in []string) map[string]string {
	out := map[string]string{}

	for i, t := range in {
		at := fmt.Sprintf("%s[%d]", path, i)

		rest, effect, ok := strings.Cut(t, ":")
		key, value, _ := strings.Cut(rest, "=")

		switch {
		case !ok || effect == "":
			p.errorf(at, "%q has no effect; write key=value:Effect or key:Effect, the effect one of %s", t, strings.Join(TaintEffects, ", "))
			continue
		case !slices.Contains(TaintEffects, effect):
			hint := ""
			if i := slices.IndexFunc(TaintEffects, func(e string) bool { return strings.EqualFold(e, effect) }); i >= 0 {
				hint = fmt.Sprintf(" (effects are case-sensitive: %s)", TaintEffects[i])
			}

			p.errorf(at, "%q: the effect %q is not one of %s%s", t, effect, strings.Join(TaintEffects, ", "), hint)

			continue
		case key == controlPlaneTaint:
			p.errorf(at, "%q: Talos sets the %s taint on control planes itself; use allowSchedulingOnControlPlanes to remove it", t, controlPlaneTaint)
			continue
		case strings.HasPrefix(key, "node.kubernetes.io/") || strings.HasPrefix(key, "node.cloudprovider.kubernetes.io/"):
			p.errorf(at, "%q: Kubernetes' node controller sets and clears the taints of %s itself (not-ready, unreachable, "+
				"unschedulable, …); choose a key of your own, e.g. example.com/dedicated", t, key[:strings.Index(key, "/")+1])
			continue
		}

		if why := checkLabel(key, value); why != "" {
			p.errorf(at, "%q: %s", t, strings.Replace(why, "label", "taint", 1))
			continue
		}

		if _, dup := out[key]; dup {
			p.errorf(at, "%q: the key %q is tainted twice; Talos keeps one taint per key", t, key)
			continue
		}

		out[key] = effect
		if value != "" {
			out[key] = value + ":" + effect
		}
	}

	return out
}

// nodeTaints are a node's taints: nodeDefaults.taints with the node's own over them, by key; nil
// when there are none.
func nodeTaints(defaults, own map[string]string) map[string]string {
	if len(defaults)+len(own) == 0 {
		return nil
	}

	out := maps.Clone(defaults)
	if out == nil {
		out = map[string]string{}
	}

	maps.Copy(out, own)

	return out
}

// nodeRestricted tells whether a node may not set label key on its own Node: the NodeRestriction
// admission plugin refuses the kubernetes.io and k8s.io namespaces (and their subdomains) but for
// the kubelet's labels (k8s.io/kubelet's IsKubeletLabel: the well-known ones, and the
// kubelet.kubernetes.io and node.kubernetes.io namespaces with their subdomains).
func nodeRestricted(key string) bool {
	namespace, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}

	in := func(ns string) bool { return namespace == ns || strings.HasSuffix(namespace, "."+ns) }

	kubelet := in("kubelet.kubernetes.io") || in("node.kubernetes.io") || slices.Contains([]string{
		"kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
		"failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region", "beta.kubernetes.io/instance-type",
		"node.kubernetes.io/instance-type", "kubernetes.io/os", "kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/arch",
	}, key)

	return (in("kubernetes.io") || in("k8s.io")) && !kubelet
}
