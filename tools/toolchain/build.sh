#!/usr/bin/env bash
# Builds the pinned Pulumi toolchain (CLI, YAML language host, go/nodejs/python
# language hosts) from the Go module proxy into a cache directory, skipping what
# is already built. See README.md beside this file.
#
# Usage:
#   tools/toolchain/build.sh              build what is missing; last stdout line = bin dir
#   tools/toolchain/build.sh --print-dir  print the bin dir only, build nothing
#
# Progress goes to stderr; stdout carries only the bin dir, so a Makefile can do
#   PULUMI_BIN := $(shell tools/toolchain/build.sh)
#
# Environment:
#   TALOS_PROXMOX_TOOLCHAIN_DIR  cache root
#                                (default ${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-talos-proxmox/toolchain)
#   GO                           go command to use (default: go)
set -euo pipefail

# shellcheck source=../lib/cachebuild.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/cachebuild.sh"
cache_start toolchain 2,16 "$@"

# --- pinned versions: read from the committed wrapper go.mod files -----------

# modver <wrapper dir> <module path>: the version required in that go.mod.
modver() {
	local file=$here/$1/go.mod mod=$2 v
	[ -f "$file" ] || die "missing $file"
	v=$(awk -v m="$mod" '
		$1 == "replace" { next }
		$1 == "require" && $2 == m { print $3; exit }
		$1 == m && $2 ~ /^v/ { print $2; exit }
	' "$file")
	[ -n "$v" ] || die "$mod is not required in ${file#"$here"/}"
	printf '%s\n' "$v"
}

PULUMI_VERSION=$(modver pulumi github.com/pulumi/pulumi/pkg/v3)
PULUMI_SDK_VERSION=$(modver pulumi github.com/pulumi/pulumi/sdk/v3)
[ "$PULUMI_VERSION" = "$PULUMI_SDK_VERSION" ] ||
	die "pulumi/go.mod: pkg/v3 $PULUMI_VERSION and sdk/v3 $PULUMI_SDK_VERSION differ; pin them together"
YAML_VERSION=$(modver yaml github.com/pulumi/pulumi-yaml)
HOSTS_VERSION=$(modver langhosts github.com/pulumi/pulumi/sdk/v3)

# --- components ------------------------------------------------------------

COMPONENTS="pulumi yaml langhosts"
SDK=github.com/pulumi/pulumi/sdk/v3
SDK_VERSION_VAR=$SDK/go/common/version.Version

# spec <component>: sets c_pkgs, c_ldflags, c_bins (space separated) and
# c_scripts (sdk/v3 module-relative paths of scripts copied beside the
# binaries; a leading '?' marks an optional one). All lists are single-space
# separated: they are part of the cache key.
spec() {
	c_scripts=""
	case $1 in
	pulumi)
		c_pkgs="github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
		c_ldflags="-X $SDK_VERSION_VAR=$PULUMI_VERSION"
		c_bins="pulumi"
		;;
	yaml)
		c_pkgs="github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml"
		c_ldflags="-X github.com/pulumi/pulumi-yaml/pkg/version.Version=$YAML_VERSION"
		c_bins="pulumi-language-yaml"
		;;
	langhosts)
		c_pkgs="$SDK/go/pulumi-language-go"
		c_pkgs+=" $SDK/nodejs/cmd/pulumi-language-nodejs"
		c_pkgs+=" $SDK/python/cmd/pulumi-language-python"
		c_ldflags="-X $SDK_VERSION_VAR=$HOSTS_VERSION"
		c_bins="pulumi-language-go pulumi-language-nodejs pulumi-language-python"
		# The python host refuses to run without its exec script; the others are
		# the shims the CLI release archives ship beside the hosts.
		c_scripts="python/cmd/pulumi-language-python-exec"
		c_scripts+=" ?nodejs/dist/pulumi-resource-pulumi-nodejs"
		c_scripts+=" ?nodejs/dist/pulumi-analyzer-policy"
		c_scripts+=" ?python/dist/pulumi-resource-pulumi-python"
		c_scripts+=" ?python/dist/pulumi-analyzer-policy-python"
		;;
	*) die "unknown component $1" ;;
	esac
}

# --- cache key ---------------------------------------------------------------


# The recipe (what is built, how) plus the exact wrapper module files.
recipe() {
	local c f
	for c in $COMPONENTS; do
		spec "$c"
		printf 'component %s\npkgs %s\nldflags %s\nbins %s\nscripts %s\n' \
			"$c" "$c_pkgs" "$c_ldflags" "$c_bins" "$c_scripts"
		for f in go.mod go.sum tools.go; do
			printf 'file %s/%s\n' "$c" "$f"
			cat "$here/$c/$f"
		done
	done
}

os=$(uname -s | tr '[:upper:]' '[:lower:]')
arch=$(uname -m)
hash=$(recipe | sha256 | cut -c1-12)
KEY="pulumi-$PULUMI_VERSION-yaml-$YAML_VERSION-hosts-$HOSTS_VERSION-$os-$arch-$hash"
ROOT=${TALOS_PROXMOX_TOOLCHAIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-talos-proxmox/toolchain}
KEYDIR=$ROOT/$KEY
BINDIR=$KEYDIR/bin
STAMPDIR=$KEYDIR/stamps

# --- an installed Pulumi ------------------------------------------------------

# A user who has Pulumi skips the build (about 8 minutes cold on 2 cores, more beside other builds): $PULUMI (the path of a
# pulumi binary) or `pulumi` on PATH is used when it reports this pinned version or a newer v3
# one and its language hosts sit beside it, as Pulumi's release archives and installers put
# them. TALOS_PROXMOX_BUILD_PULUMI=1 builds the pinned one anyway.
HOSTS="pulumi-language-yaml pulumi-language-go pulumi-language-nodejs pulumi-language-python pulumi-language-python-exec"

# Optional shims the release archives put beside the hosts; linked when present.
SHIMS="pulumi-resource-pulumi-nodejs pulumi-resource-pulumi-python pulumi-analyzer-policy pulumi-analyzer-policy-python"

# installed: sets inst_cli, inst_hosts (the directory of the hosts), inst_version and inst_from
# to a usable installed Pulumi and succeeds, or sets skip to why none is used (empty when there
# is none at all) and fails. A PULUMI the user set that cannot be used is an error, not a
# reason for a long build.
installed() {
	local cli=${PULUMI:-} v core dir h missing
	inst_from=PULUMI skip=
	[ "${TALOS_PROXMOX_BUILD_PULUMI:-}" != 1 ] || return 1
	if [ -z "$cli" ]; then
		cli=$(command -v pulumi 2>/dev/null) || return 1
		inst_from="pulumi on PATH"
	fi
	# A build in this cache (of this or an older pin) is not an installation.
	case $cli in "$ROOT"/*) return 1 ;; esac
	[ -x "$cli" ] && [ -f "$cli" ] || { skip="$inst_from=$cli is not an executable file"; return 1; }
	v=$("$cli" version 2>/dev/null | tail -n1) || v=
	[[ $v =~ ^v?(3\.[0-9]+\.[0-9]+)(-.*)?$ ]] || { skip="$inst_from ($cli) reports version '${v:-nothing}', not a Pulumi v3"; return 1; }
	core=v${BASH_REMATCH[1]}
	v=v${v#v}
	# Not older than the pin: a newer release, or the pin itself (a pre-release of the pin is older).
	if [ "$core" = "$PULUMI_VERSION" ] && [ "$v" != "$core" ] ||
		[ "$(printf '%s\n%s\n' "$PULUMI_VERSION" "$core" | sort -V | head -n1)" != "$PULUMI_VERSION" ]; then
		skip="$inst_from ($cli) is $v, older than the pinned $PULUMI_VERSION"
		return 1
	fi
	# The hosts are beside the file a symlink names (/usr/local/bin/pulumi → ~/.pulumi/bin/pulumi), or beside the link.
	for dir in "$(dirname "$(readlink -f "$cli" 2>/dev/null || echo "$cli")")" "$(dirname "$cli")"; do
		missing=
		for h in $HOSTS; do [ -x "$dir/$h" ] || missing="$missing $h"; done
		if [ -z "$missing" ]; then
			inst_cli=$(cd "$(dirname "$cli")" && pwd)/$(basename "$cli") inst_hosts=$(cd "$dir" && pwd) inst_version=$v
			return 0
		fi
	done
	skip="$inst_from ($cli, $v) has no$missing beside it"
	return 1
}

if installed; then
	# The tests and the demo put the bin dir first on PATH: a directory of links to the CLI and
	# its hosts only, so an installation in a shared directory (/usr/local/bin, Homebrew's bin)
	# does not put every other program there ahead of the user's.
	key=installed-$(printf '%s\n' "$inst_cli" "$inst_hosts" "$inst_version" | sha256 | cut -c1-12)
	dir=$ROOT/$key/bin
	mkdir -p "$dir"
	ln -sfn "$inst_cli" "$dir/pulumi"
	for h in $HOSTS $SHIMS; do
		[ ! -e "$inst_hosts/$h" ] || ln -sfn "$inst_hosts/$h" "$dir/$h"
	done
	$print_only || log "using the installed Pulumi $inst_version at $inst_cli ($inst_from), not building the pinned $PULUMI_VERSION (TALOS_PROXMOX_BUILD_PULUMI=1 builds it)"
	cache_done "$dir"
fi
[ -z "${PULUMI:-}" ] || [ -z "$skip" ] || die "$skip: unset PULUMI to build the pinned $PULUMI_VERSION here (about 8 min cold on 2 cores)"

! $print_only || cache_done "$BINDIR"

# --- build -------------------------------------------------------------------

command -v "$GO" >/dev/null 2>&1 || die "'$GO' not found; a Go toolchain is needed"
mkdir -p "$BINDIR" "$STAMPDIR"

# Serialise concurrent runs on the same key (the second one then skips).
cache_lock "$KEYDIR" "$KEY"

tmpdirs=()
cleanup() {
	local d
	for d in ${tmpdirs[@]+"${tmpdirs[@]}"}; do rm -rf "$d"; done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM


# is_built <component>: its stamp exists and every file it lists is present,
# executable and of the recorded size.
is_built() {
	local stamp=$STAMPDIR/$1 kind name size
	[ -f "$stamp" ] || return 1
	grep -q '^file ' "$stamp" || return 1
	while read -r kind name size; do
		[ "$kind" = file ] || continue
		[ -x "$BINDIR/$name" ] || return 1
		[ "$(filesize "$BINDIR/$name")" = "$size" ] || return 1
	done <"$stamp"
}

# Go settings: build for this machine, with the committed go.mod/go.sum only.
unset GOOS GOARCH
export GOWORK=off

build() {
	local c=$1 tmp start f src optional moddir names=""
	spec "$c"
	start=$(date +%s)
	log "building $c ($c_bins) ..."
	tmp=$(mktemp -d "$KEYDIR/.tmp-$c.XXXXXX")
	tmpdirs+=("$tmp")
	# Note: no bare `go mod download` here: some indirect pseudo-versions answer
	# 403 on the proxy for .info, while go build only needs .mod/.zip.
	# shellcheck disable=SC2086 # c_pkgs is a word list
	(cd "$here/$c" && "$GO" build -mod=readonly -ldflags "$c_ldflags" -o "$tmp/" $c_pkgs)
	for f in $c_bins; do
		[ -f "$tmp/$f" ] || die "$c: go build produced no $f"
		names="$names $f"
	done
	if [ -n "$c_scripts" ]; then
		moddir=$(cd "$here/$c" && "$GO" list -mod=readonly -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)
		[ -d "$moddir" ] || die "$c: module directory of sdk/v3 not found"
		for src in $c_scripts; do
			optional=false
			case $src in \?*)
				optional=true
				src=${src#\?}
				;;
			esac
			if [ -f "$moddir/$src" ]; then
				f=${src##*/}
				cp "$moddir/$src" "$tmp/$f"
				names="$names $f"
			elif ! $optional; then
				die "$c: $src not found in the sdk/v3 module"
			fi
		done
	fi
	{
		printf 'component %s\nkey %s\ngo %s\nbuilt %s\n' \
			"$c" "$KEY" "$("$GO" env GOVERSION)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
		for f in $names; do
			chmod 0755 "$tmp/$f"
			printf 'file %s %s\n' "$f" "$(filesize "$tmp/$f")"
		done
	} >"$tmp/.stamp"
	# rename(2) within one file system: a file in bin/ is always complete, and
	# the stamp is written only after all of the component's files are in place.
	for f in $names; do mv -f "$tmp/$f" "$BINDIR/$f"; done
	mv -f "$tmp/.stamp" "$STAMPDIR/$c"
	rm -rf "$tmp"
	log "built $c in $(($(date +%s) - start))s"
}

log "bin dir $BINDIR"
[ -z "$skip" ] || log "not using an installed Pulumi: $skip"
for c in $COMPONENTS; do
	is_built "$c" && continue
	log "building what is missing of the Pulumi CLI $PULUMI_VERSION, the YAML host $YAML_VERSION and the Go/Node.js/Python hosts $HOSTS_VERSION from source: about 8 min cold on 2 cores (849 s of CPU), more beside other builds; PULUMI=<path to pulumi> (v3, >= $PULUMI_VERSION, with its language hosts beside it) skips this"
	break
done
for c in $COMPONENTS; do
	if is_built "$c"; then
		log "$c is up to date"
	else
		rm -f "$STAMPDIR/$c"
		build "$c"
	fi
done

printf '%s\n' "$BINDIR" >&3
