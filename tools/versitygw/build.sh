#!/usr/bin/env bash
# Builds the pinned versitygw (version from tools/versitygw/go.mod), an
# S3-compatible server, from the Go module proxy into a cache directory, unless
# it is already built there. See README.md beside this file.
#
# Usage:
#   tools/versitygw/build.sh              build if missing; last stdout line = bin dir
#   tools/versitygw/build.sh --print-dir  print the bin dir only, build nothing
#
# Progress goes to stderr; stdout carries only the bin dir, so a Makefile can do
#   S3_BIN := $(shell tools/versitygw/build.sh --print-dir)/versitygw
#
# Environment:
#   TALOS_PROXMOX_TOOLCHAIN_DIR  cache root, shared with tools/toolchain/build.sh
#                                (default ${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-talos-proxmox/toolchain)
#   GO                           go command to use (default: go)
set -euo pipefail

# shellcheck source=../lib/cachebuild.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/cachebuild.sh"
cache_start versitygw 2,16 "$@"

# --- recipe: the version is the one the committed wrapper go.mod requires -----

MOD=github.com/versity/versitygw
PKG=$MOD/cmd/versitygw
BIN=versitygw
VERSION=$(awk -v m="$MOD" '$1 == "require" && $2 == m { print $3; exit } $1 == m && $2 ~ /^v/ { print $2; exit }' "$here/go.mod")
[ -n "$VERSION" ] || die "$MOD is not required in tools/versitygw/go.mod"
# The module's go.sum hash stands in for the commit (the proxy has no VCS info).
SUM=$(awk -v m="$MOD" -v v="$VERSION" '$1 == m && $2 == v { print $3; exit }' "$here/go.sum")
[ -n "$SUM" ] || die "$MOD $VERSION has no hash in tools/versitygw/go.sum"
# As upstream's Makefile: -X main.Version/Build/BuildTime; BuildTime is the release time the
# proxy records (@DATE@, filled in at build time), so the binary does not depend on when it was
# built. Static, without cgo (the posix backend needs none).
LDFLAGS_TMPL="-s -w -X main.Version=$VERSION -X main.Build=$SUM -X main.BuildTime=@DATE@"

recipe() {
	local f
	printf 'pkg %s\nldflags %s\nbin %s\ncgo 0\n' "$PKG" "$LDFLAGS_TMPL" "$BIN"
	for f in go.mod go.sum tools.go; do
		printf 'file %s\n' "$f"
		cat "$here/$f"
	done
}

os=$(uname -s | tr '[:upper:]' '[:lower:]')
arch=$(uname -m)
KEY="versitygw-$VERSION-$os-$arch-$(recipe | sha256 | cut -c1-12)"
ROOT=${TALOS_PROXMOX_TOOLCHAIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-talos-proxmox/toolchain}
KEYDIR=$ROOT/$KEY
BINDIR=$KEYDIR/bin
STAMP=$KEYDIR/stamp

! $print_only || cache_done "$BINDIR"

# --- build -------------------------------------------------------------------

# is_built: the stamp holds the size of an executable binary in bin/.
is_built() { [ -f "$STAMP" ] && [ -x "$BINDIR/$BIN" ] && [ "$(cat "$STAMP")" = "$(filesize "$BINDIR/$BIN")" ]; }

if ! is_built; then
	command -v "$GO" >/dev/null 2>&1 || die "'$GO' not found; a Go toolchain is needed"
	mkdir -p "$BINDIR"
	# Serialise concurrent runs on the same key (the second one then skips).
	cache_lock "$KEYDIR" "$KEY"
fi
if ! is_built; then
	rm -f "$STAMP"
	unset GOOS GOARCH
	export GOWORK=off CGO_ENABLED=0
	start=$(date +%s)
	log "building $BIN $VERSION into $BINDIR ..."
	tmp=$(mktemp -d "$KEYDIR/.tmp-XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	date=$(cd "$here" && "$GO" list -mod=readonly -m -f '{{with .Time}}{{.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' "$MOD" 2>/dev/null) || true
	(cd "$here" && "$GO" build -mod=readonly -trimpath -ldflags "${LDFLAGS_TMPL//@DATE@/${date:-unknown}}" -o "$tmp/$BIN" "$PKG")
	chmod 0755 "$tmp/$BIN"
	"$tmp/$BIN" --version >/dev/null || die "the built $BIN does not run"
	filesize "$tmp/$BIN" >"$tmp/stamp"
	# rename(2) within one file system: bin/ never holds a half-written binary,
	# and the stamp is written only after the binary is in place.
	mv -f "$tmp/$BIN" "$BINDIR/$BIN"
	mv -f "$tmp/stamp" "$STAMP"
	log "built $BIN in $(($(date +%s) - start))s ($(($(filesize "$BINDIR/$BIN") / 1048576)) MiB)"
else
	log "$BIN $VERSION is up to date in $BINDIR"
fi

printf '%s\n' "$BINDIR" >&3
