#!/usr/bin/env bash
# Builds the lab-only pulumi-resource-proxmoxve stand-in (the real bpg Terraform provider through
# pulumi-terraform-bridge; see README.md) into the given path. Never shipped.
#
#   lab/proxmoxve/build.sh <output-path>
#
# Runs from any directory. Downloads only what go.sum pins (no bare `go mod download`).
# About 3.5 min cold on 2 cores; seconds with a warm Go build cache.
set -euo pipefail

if [[ $# -ne 1 ]]; then
	echo "usage: $0 <output-path>" >&2
	exit 2
fi

out=$1
[[ $out = /* ]] || out=$PWD/$out

cd "$(dirname "${BASH_SOURCE[0]}")"
exec go build -mod=readonly -buildvcs=false -o "$out" ./cmd/pulumi-resource-proxmoxve
