#!/usr/bin/env bash
# Builds every tool `make test` needs (Pulumi CLI and language hosts, the lab's Kubernetes,
# golangci-lint, versitygw) one after the other as a new machine would: empty Go module, Go build
# and tool caches in a temporary HOME, static and -trimpath as the Makefile builds. Prints each
# tool's wall time and CPU (user + sys) and the total, then removes the temporary HOME. This is
# the floor a cold `make test` pays before this repository compiles (docs/performance.md).
#
# Usage: tools/coldtools.sh   (21–26 minutes on 2 cores; needs the Go module proxy)
set -euo pipefail
export LC_ALL=C

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
goenv=$(go env GOENV)
flags=$(go env GOFLAGS)
home=$(mktemp -d)
trap 'chmod -R u+w "$home" 2>/dev/null || true; rm -rf "$home"' EXIT

# The machine's go settings (GOPROXY, GOFLAGS ...) and npm settings carry over; nothing built does.
if [ -f "$goenv" ]; then
	mkdir -p "$home/.config/go"
	cp "$goenv" "$home/.config/go/env"
fi
[ -f "$HOME/.npmrc" ] && cp "$HOME/.npmrc" "$home/"

# The caches are named explicitly: the copied settings file may name the machine's own.
unset XDG_CACHE_HOME XDG_CONFIG_HOME GOENV TALOS_PROXMOX_TOOLCHAIN_DIR TALOS_PROXMOX_KUBE_DIR
# Everything is built, even where an installed Pulumi or a given Kubernetes would be used (make
# exports its own TALOS_KUBE_BIN, which lies outside the temporary cache).
unset PULUMI TALOS_KUBE_BIN
export TALOS_PROXMOX_BUILD_PULUMI=1
export HOME=$home CGO_ENABLED=0 GOFLAGS="$flags -trimpath"
export GOCACHE=$home/.cache/go-build GOMODCACHE=$home/go/pkg/mod

total_wall=0 total_cpu=0
TIMEFORMAT='%R %U %S'
printf '%-10s %10s %10s\n' tool wall-s cpu-s
for t in toolchain kube lint versitygw; do
	log=$home/$t.log
	if ! times=$({ time "$root/tools/$t/build.sh" >"$log" 2>&1; } 2>&1); then
		echo "coldtools: $t failed:" >&2
		tail -20 "$log" >&2
		exit 1
	fi
	read -r wall user sys <<<"$times"
	cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.1f", u + s }')
	printf '%-10s %10.1f %10s\n' "$t" "$wall" "$cpu"
	total_wall=$(awk -v a="$total_wall" -v b="$wall" 'BEGIN { print a + b }')
	total_cpu=$(awk -v a="$total_cpu" -v b="$cpu" 'BEGIN { print a + b }')
done
printf '%-10s %10.1f %10.1f\n' total "$total_wall" "$total_cpu"
awk -v c="$total_cpu" -v n="$(nproc)" 'BEGIN { printf "cold tools: at least %.1f min on %d cores\n", c / n / 60, n }'
