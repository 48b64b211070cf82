// A Pulumi program against the generated Node.js SDK, type-checked by check.sh (tsc).
//
// It uses every kind of input the schema has: plain scalars, a plain map of plain objects, plain
// nested objects and lists, and inputs that take secret outputs.
import * as pulumi from "@pulumi/pulumi";
import * as talosproxmox from "@talos-proxmox/pulumi";

const controlPlane: talosproxmox.types.input.NodeArgs = {
    hostNode: "pve1",
    role: "controlplane",
    ip: "10.0.0.11",
    cpu: 4,
    labels: { tier: "control" },
    dataDisks: [{ sizeGib: 50, mountPath: "/var/mnt/data" }],
    configPatches: [pulumi.secret("machine: {}")],
};

const cluster = new talosproxmox.TalosProxmoxCluster("lab", {
    clusterName: "homelab",
    talosVersion: "v1.11.5",
    vip: "10.0.0.10",
    network: { gateway: "10.0.0.1", prefixLength: 24, nameservers: ["1.1.1.1"] },
    image: { extensions: ["siderolabs/qemu-guest-agent"] },
    nodes: {
        "cp-1": controlPlane,
        "worker-1": { hostNode: "pve2", role: "worker", ip: "10.0.0.21" },
    },
    configPatches: pulumi.secret(["cluster: {}"]),
    inlineManifests: [{ name: "pool", contents: pulumi.secret("kind: ConfigMap") }],
});

export const kubeconfig: pulumi.Output<string> = cluster.kubeconfig;
export const controlPlaneIps: pulumi.Output<string[]> = cluster.controlPlaneIps;
export const vmIds: pulumi.Output<Record<string, number>> = cluster.nodes.apply((nodes) =>
    Object.fromEntries(Object.entries(nodes).map(([name, node]) => [name, node.vmId])),
);
