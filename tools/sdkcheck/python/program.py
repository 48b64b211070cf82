"""A Pulumi program against the generated Python SDK, type-checked by check.sh (mypy).

It uses every kind of input the schema has: plain scalars, a plain mapping of plain objects (as
Args classes and as dicts), plain nested objects and lists, and inputs that take secret outputs.
"""

from typing import Mapping

import pulumi
import pulumi_talos_proxmox as talos_proxmox

cluster = talos_proxmox.TalosProxmoxCluster(
    "lab",
    cluster_name="homelab",
    talos_version="v1.11.5",
    vip="10.0.0.10",
    network=talos_proxmox.NetworkArgs(gateway="10.0.0.1", prefix_length=24, nameservers=["1.1.1.1"]),
    image={"extensions": ["siderolabs/qemu-guest-agent"]},
    nodes={
        "cp-1": talos_proxmox.NodeArgs(
            host_node="pve1",
            role="controlplane",
            ip="10.0.0.11",
            cpu=4,
            labels={"tier": "control"},
            data_disks=[talos_proxmox.DataDiskArgs(size_gib=50, mount_path="/var/mnt/data")],
            config_patches=[pulumi.Output.secret("machine: {}")],
        ),
        "worker-1": {"host_node": "pve2", "role": "worker", "ip": "10.0.0.21"},
    },
    config_patches=pulumi.Output.secret(["cluster: {}"]),
    inline_manifests=[
        talos_proxmox.InlineManifestArgs(name="pool", contents=pulumi.Output.secret("kind: ConfigMap")),
    ],
)

kubeconfig: pulumi.Output[str] = cluster.kubeconfig
nodes: pulumi.Output[Mapping[str, talos_proxmox.outputs.NodeInfo]] = cluster.nodes
pulumi.export("kubeconfig", kubeconfig)
pulumi.export("controlPlaneIps", cluster.control_plane_ips)
pulumi.export("vmIds", nodes.apply(lambda ns: {name: n.vm_id for name, n in ns.items()}))
