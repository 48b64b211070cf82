"""A highly available Talos cluster on three Proxmox hosts: three control planes behind a VIP, a
Longhorn worker and a GPU worker.

Every site-specific value is stack configuration with a default, so the program runs unchanged
on a real Proxmox cluster and in the local lab. Proxmox credentials are the proxmoxve provider's
own stack config (proxmoxve:endpoint, proxmoxve:apiToken as a secret).
"""

from typing import List

import pulumi
import pulumi_talos_proxmox as talosproxmox

# Announce LoadBalancer addresses on the LAN from the pool (seed 001's setup).
L2_MANIFESTS = """\
apiVersion: cilium.io/v2alpha1
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
    - cidr: {pool}
"""

config = pulumi.Config()


def strings(key: str, default: List[str]) -> List[str]:
    value = config.get_object(key)
    return [str(v) for v in value] if value else default


hosts = strings("hosts", ["pve1", "pve2", "pve3"])
addresses = strings(
    "addresses",
    ["192.168.10.11", "192.168.10.12", "192.168.10.13", "192.168.10.21", "192.168.10.22"],
)

cluster = talosproxmox.TalosProxmoxCluster(
    "homelab",
    cluster_name="homelab",
    talos_version=config.get("talosVersion") or "v1.13.9",
    vip=config.get("vip") or "192.168.10.10",
    network=talosproxmox.NetworkArgs(
        gateway=config.get("gateway") or "192.168.10.1",
        prefix_length=config.get_int("prefixLength") or 24,
        nameservers=strings("nameservers", ["1.1.1.1", "9.9.9.9"]),
        ntp_servers=strings("ntpServers", ["time.cloudflare.com"]),
    ),
    image=talosproxmox.ImageArgs(
        factory_url=config.get("factoryUrl") or "https://factory.talos.dev",
        extensions=["siderolabs/qemu-guest-agent", "siderolabs/iscsi-tools"],
    ),
    node_defaults=talosproxmox.NodeDefaultsArgs(cpu=4, memory_mib=8192, tags=["homelab"]),
    nodes={
        "cp-1": talosproxmox.NodeArgs(host_node=hosts[0], role="controlplane", ip=addresses[0]),
        "cp-2": talosproxmox.NodeArgs(host_node=hosts[1], role="controlplane", ip=addresses[1]),
        "cp-3": talosproxmox.NodeArgs(host_node=hosts[2], role="controlplane", ip=addresses[2]),
        "storage-1": talosproxmox.NodeArgs(
            host_node=hosts[0],
            role="worker",
            ip=addresses[3],
            labels={"node.longhorn.io/create-default-disk": "true"},
            data_disks=[talosproxmox.DataDiskArgs(size_gib=200, mount_path="/var/lib/longhorn")],
        ),
        "gpu-1": talosproxmox.NodeArgs(
            host_node=hosts[1],
            role="worker",
            ip=addresses[4],
            memory_mib=16384,
            labels={"nvidia.com/gpu.present": "true"},
            pci_devices=[talosproxmox.PciDeviceArgs(mapping="gpu")],
        ),
    },
    # Cilium as the CNI, rendered into the control planes' configuration with the Talos values.
    cilium=talosproxmox.CiliumArgs(
        version="1.18.0",
        repository=config.get("ciliumRepository") or "https://helm.cilium.io",
        values={
            "l2announcements": {"enabled": True},
            "hubble": {"relay": {"enabled": True}, "ui": {"enabled": True}},
        },
    ),
    inline_manifests=[
        talosproxmox.InlineManifestArgs(
            name="cilium-l2",
            contents=L2_MANIFESTS.format(pool=config.get("loadBalancerPool") or "192.168.10.240/28"),
        )
    ],
)

pulumi.export("endpoint", cluster.endpoint)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("talosconfig", cluster.talosconfig)
pulumi.export("nodes", cluster.nodes)
