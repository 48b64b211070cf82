// A highly available Talos cluster on three Proxmox hosts: three control planes behind a VIP, a
// Longhorn worker and a GPU worker.
//
// Every site-specific value is stack configuration with a default, so the program runs unchanged
// on a real Proxmox cluster and in the local lab. Proxmox credentials are the proxmoxve
// provider's own stack config (proxmoxve:endpoint, proxmoxve:apiToken as a secret).
import * as pulumi from "@pulumi/pulumi";
import * as talosproxmox from "@talos-proxmox/pulumi";

const config = new pulumi.Config();
const hosts = config.getObject<string[]>("hosts") ?? ["pve1", "pve2", "pve3"];
const addresses = config.getObject<string[]>("addresses") ??
    ["192.168.10.11", "192.168.10.12", "192.168.10.13", "192.168.10.21", "192.168.10.22"];
const pool = config.get("loadBalancerPool") ?? "192.168.10.240/28";

// Announce LoadBalancer addresses on the LAN from the pool (seed 001's setup).
const l2Manifests = `apiVersion: cilium.io/v2alpha1
kind: CiliumL2AnnouncementPolicy
metadata:
  name: external
spec:
  loadBalancerIPs: true
  interfaces: ["^e.*"]
  nodeSelector:
    matchExpressions:
      - key: node-role.kubernetes.io/control-plane
        operator: DoesNotExist
---
apiVersion: cilium.io/v2alpha1
kind: CiliumLoadBalancerIPPool
metadata:
  name: external
spec:
  blocks:
    - cidr: ${pool}
`;

const cluster = new talosproxmox.TalosProxmoxCluster("homelab", {
    clusterName: "homelab",
    talosVersion: config.get("talosVersion") ?? "v1.13.9",
    vip: config.get("vip") ?? "192.168.10.10",
    network: {
        gateway: config.get("gateway") ?? "192.168.10.1",
        prefixLength: config.getNumber("prefixLength") ?? 24,
        nameservers: config.getObject<string[]>("nameservers") ?? ["1.1.1.1", "9.9.9.9"],
        ntpServers: config.getObject<string[]>("ntpServers") ?? ["time.cloudflare.com"],
    },
    image: {
        factoryUrl: config.get("factoryUrl") ?? "https://factory.talos.dev",
        extensions: ["siderolabs/qemu-guest-agent", "siderolabs/iscsi-tools"],
    },
    nodeDefaults: { cpu: 4, memoryMib: 8192, tags: ["homelab"] },
    nodes: {
        "cp-1": { hostNode: hosts[0], role: "controlplane", ip: addresses[0] },
        "cp-2": { hostNode: hosts[1], role: "controlplane", ip: addresses[1] },
        "cp-3": { hostNode: hosts[2], role: "controlplane", ip: addresses[2] },
        "storage-1": {
            hostNode: hosts[0],
            role: "worker",
            ip: addresses[3],
            labels: { "node.longhorn.io/create-default-disk": "true" },
            dataDisks: [{ sizeGib: 200, mountPath: "/var/lib/longhorn" }],
        },
        "gpu-1": {
            hostNode: hosts[1],
            role: "worker",
            ip: addresses[4],
            memoryMib: 16384,
            labels: { "nvidia.com/gpu.present": "true" },
            pciDevices: [{ mapping: "gpu" }],
        },
    },
    // Cilium as the CNI, rendered into the control planes' configuration with the Talos values.
    cilium: {
        version: "1.18.0",
        repository: config.get("ciliumRepository") ?? "https://helm.cilium.io",
        values: {
            l2announcements: { enabled: true },
            hubble: { relay: { enabled: true }, ui: { enabled: true } },
        },
    },
    inlineManifests: [{ name: "cilium-l2", contents: l2Manifests }],
});

export const endpoint = cluster.endpoint;
export const kubeconfig = cluster.kubeconfig;
export const talosconfig = cluster.talosconfig;
export const nodes = cluster.nodes;
