#!/usr/bin/env bash
# What `make demo` does until the local lab exists (issues 5 and 6).
set -euo pipefail
cd "$(dirname "$0")/.."

cat <<'MSG'
make demo — status

  The full demo runs `pulumi up` of the example cluster (three control planes on two Proxmox
  hosts behind a VIP, two workers) against a local lab on loopback: the real bpg Proxmox
  provider against a Proxmox VE API fake, and emulated Talos nodes. It then prints the
  endpoint, the node addresses and where the kubeconfig was written (mode 0600).

  That lab is not built yet: it arrives with issue 5 (Talos node emulator and talos provider
  stand-in) and issue 6 (bridged bpg provider, Proxmox API fake and `make demo`).

  What this run did: built the pinned Pulumi toolchain and the plugin. Here they are:
MSG

echo "    pulumi:  $("$PULUMI_TOOLCHAIN_BIN/pulumi" version)"
echo "    plugin:  $TALOS_PROXMOX_PLUGIN"
echo
echo "  The component's inputs, as the plugin serves them:"
"$PULUMI_TOOLCHAIN_BIN/pulumi" package get-schema "$TALOS_PROXMOX_PLUGIN" |
	python3 -c 'import json,sys; s=json.load(sys.stdin); r=s["resources"]["talos-proxmox:index:TalosProxmoxCluster"]
for k in sorted(r["inputProperties"]): print("    -", k, "(required)" if k in r.get("requiredInputs",[]) else "")'
