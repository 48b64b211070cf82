#!/usr/bin/env bash
# Builds the pinned Kubernetes control plane (one hyperkube-style `kube` binary:
# apiserver, controller-manager, scheduler) from the Go module proxy into a
# cache directory, unless it is already built. See README.md beside this file.
#
# Usage:
#   tools/kube/build.sh              build if missing; last stdout line = bin dir
#   tools/kube/build.sh --print-dir  print the bin dir only, build nothing
#
# Progress goes to stderr; stdout carries only the bin dir, so a Makefile can do
#   KUBE_BIN := $(shell tools/kube/build.sh --print-dir)/kube
#
# Environment:
#   TALOS_PROXMOX_KUBE_DIR  cache root
#                           (default ${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-talos-proxmox/kube)
#   GO                      go command to use (default: go)
set -euo pipefail

# shellcheck source=../lib/cachebuild.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/cachebuild.sh"
cache_start kube 2,16 "$@"

# --- pinned version: read from the committed go.mod ---------------------------

[ -f "$here/go.mod" ] || die "missing $here/go.mod"
KUBE_VERSION=$(awk '
	$1 == "replace" { next }
	$1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit }
	$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }
' "$here/go.mod")
[[ $KUBE_VERSION =~ ^v([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] ||
	die "go.mod: k8s.io/kubernetes must be required at a release vX.Y.Z, not '${KUBE_VERSION:-nothing}'"
KUBE_MAJOR=${BASH_REMATCH[1]}
KUBE_MINOR=${BASH_REMATCH[2]}
# The staging modules (k8s.io/api, apiserver, …) are released as v0.Y.Z with v1.Y.Z.
STAGING_VERSION=v0.$KUBE_MINOR.${BASH_REMATCH[3]}
stale=$(awk -v want="$STAGING_VERSION" '
	$1 ~ /^k8s\.io\// && $2 == "=>" && $4 != want { print $1 " " $4 }
' "$here/go.mod")
[ -z "$stale" ] || die "go.mod: replace these with $STAGING_VERSION to match k8s.io/kubernetes $KUBE_VERSION: $stale"

PKG=github.com/talos-proxmox/pulumi-talos-proxmox/tools/kube
BIN=kube
# Without gitVersion the binaries report v0.0.0-master and the apiserver derives its binary and
# emulation versions from it; client-go's copy is what its User-Agent reports. gitCommit is
# not known from the module proxy: empty rather than the unexpanded "$Format:%H$".
VERSION_VARS="gitVersion=$KUBE_VERSION gitMajor=$KUBE_MAJOR gitMinor=$KUBE_MINOR gitTreeState=clean gitCommit="
ldflags="-s -w"
for kv in $VERSION_VARS; do
	ldflags+=" -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
done

# --- cache key ---------------------------------------------------------------


# The recipe (what is built, how) plus the exact module files.
recipe() {
	local f
	printf 'pkg %s\nbin %s\nldflags %s\n' "$PKG" "$BIN" "$ldflags"
	for f in go.mod go.sum main.go; do
		printf 'file %s\n' "$f"
		cat "$here/$f"
	done
}

os=$(uname -s | tr '[:upper:]' '[:lower:]')
arch=$(uname -m)
hash=$(recipe | sha256 | cut -c1-12)
KEY="kubernetes-$KUBE_VERSION-$os-$arch-$hash"
ROOT=${TALOS_PROXMOX_KUBE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-talos-proxmox/kube}
KEYDIR=$ROOT/$KEY
BINDIR=$KEYDIR/bin
STAMP=$KEYDIR/stamp

# --- a given Kubernetes --------------------------------------------------------

# TALOS_KUBE_BIN names a control plane of the pinned version the user has (this repository's
# kube binary, or an upstream release's kube-apiserver with kube-controller-manager and
# kube-scheduler beside it): it is checked and nothing is built. The Makefile passes this key's
# own path on under the same name, which is not a given one; any other path, even an older key's
# in this cache, is checked.
# version_of <binary> <args…>: the version a binary reports ("Kubernetes v1.37.0" → v1.37.0).
version_of() {
	local v
	v=$("$@" --version 2>/dev/null) || v=
	printf '%s\n' "${v##* }"
}
if [ -n "${TALOS_KUBE_BIN:-}" ] && [ "$TALOS_KUBE_BIN" != "$BINDIR/$BIN" ]; then
	given=$TALOS_KUBE_BIN
	[ -x "$given" ] && [ -f "$given" ] || die "TALOS_KUBE_BIN=$given is not an executable file (unset it to build Kubernetes $KUBE_VERSION here)"
	dir=$(cd "$(dirname "$given")" && pwd)
	if [ "$(basename "$given")" = kube-apiserver ]; then
		for c in kube-apiserver kube-controller-manager kube-scheduler; do
			[ -x "$dir/$c" ] || die "TALOS_KUBE_BIN=$given: the lab also runs $c, which is not beside it"
			v=$(version_of "$dir/$c")
			[ "$v" = "$KUBE_VERSION" ] ||
				die "TALOS_KUBE_BIN=$given: $c reports '${v:-no version}'; the lab needs Kubernetes $KUBE_VERSION (unset it to build that here)"
		done
	else
		v=$(version_of "$given" apiserver)
		[ "$v" = "$KUBE_VERSION" ] ||
			die "TALOS_KUBE_BIN=$given reports '${v:-no version}'; the lab needs Kubernetes $KUBE_VERSION (unset it to build that here)"
	fi
	$print_only || log "using TALOS_KUBE_BIN=$given (Kubernetes $KUBE_VERSION), not building it"
	cache_done "$dir"
fi

! $print_only || cache_done "$BINDIR"

# --- build -------------------------------------------------------------------

# is_built: the stamp exists and the binary it lists is present, executable and of the
# recorded size.
is_built() {
	local kind name size
	[ -f "$STAMP" ] || return 1
	grep -q '^file ' "$STAMP" || return 1
	while read -r kind name size; do
		[ "$kind" = file ] || continue
		[ -x "$BINDIR/$name" ] || return 1
		[ "$(filesize "$BINDIR/$name")" = "$size" ] || return 1
	done <"$STAMP"
}

log "bin dir $BINDIR"
if is_built; then
	log "$BIN $KUBE_VERSION is up to date"
	cache_done "$BINDIR"
fi

command -v "$GO" >/dev/null 2>&1 || die "'$GO' not found; a Go toolchain is needed"
mkdir -p "$BINDIR"

# Serialise concurrent runs on the same key (the second one then skips).
cache_lock "$KEYDIR" "$KEY"
if is_built; then
	log "$BIN $KUBE_VERSION is up to date"
	cache_done "$BINDIR"
fi

tmp=
cleanup() { [ -z "$tmp" ] || rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Go settings: build for this machine, with the committed go.mod/go.sum only.
unset GOOS GOARCH
# Static, as upstream builds the control plane binaries.
export GOWORK=off CGO_ENABLED=0

rm -f "$STAMP"
start=$(date +%s)
log "building $BIN (k8s.io/kubernetes $KUBE_VERSION: apiserver, controller-manager, scheduler) from source: about 10–13 min cold on 2 cores (1145–1453 s of CPU); TALOS_KUBE_BIN=<kube-apiserver $KUBE_VERSION, the controller-manager and scheduler beside it> skips this"
tmp=$(mktemp -d "$KEYDIR/.tmp-build.XXXXXX")
# The build date is the release's (the module's time on the proxy), so the binary does not
# depend on when it was built.
date=$(cd "$here" && "$GO" list -mod=readonly -m -f '{{with .Time}}{{.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes)
if [ -n "$date" ]; then
	flags="$ldflags -X k8s.io/component-base/version.buildDate=$date -X k8s.io/client-go/pkg/version.buildDate=$date"
else
	flags=$ldflags
fi
(cd "$here" && "$GO" build -mod=readonly -trimpath -ldflags "$flags" -o "$tmp/$BIN" .)
[ -f "$tmp/$BIN" ] || die "go build produced no $BIN"
chmod 0755 "$tmp/$BIN"
"$tmp/$BIN" apiserver --version >/dev/null || die "the built $BIN does not run"
{
	printf 'key %s\ngo %s\nbuilt %s\n' "$KEY" "$("$GO" env GOVERSION)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	printf 'file %s %s\n' "$BIN" "$(filesize "$tmp/$BIN")"
} >"$tmp/.stamp"
# rename(2) within one file system: bin/kube is always complete, and the stamp is written only
# after it is in place.
mv -f "$tmp/$BIN" "$BINDIR/$BIN"
mv -f "$tmp/.stamp" "$STAMP"
log "built $BIN in $(($(date +%s) - start))s ($(($(filesize "$BINDIR/$BIN") / 1048576)) MiB)"

printf '%s\n' "$BINDIR" >&3
