// Package retry is the one loop behind every retry and every wait of provider/internal: a
// Schedule says when a failed try is made again, Do repeats a call that failed for a reason that
// passes (a busy Proxmox, an apiserver whose etcd member is leaving), and Until waits for a
// condition (a task that stops, a node that answers). Every pause is a timer raced against the
// caller's context, so a cancelled `pulumi up` or an expired gate stops a wait at once instead of
// sleeping it out. What counts as a failure that passes depends on the protocol; each client
// keeps its own classifier and marks the rest Permanent.
package retry
