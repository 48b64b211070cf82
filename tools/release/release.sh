#!/usr/bin/env bash
# Builds the release packages of one version into an output directory, from this checkout:
#
#   pulumi-resource-talos-proxmox-v<V>-<os>-<arch>.tar.gz  the plugin, as `pulumi plugin install`
#                                  and pluginDownloadURL expect it: the binary at the archive's
#                                  root (CGO_ENABLED=0, version stamped), README.md, LICENSE if any
#   pulumi_talos_proxmox-<P>-py3-none-any.whl, pulumi_talos_proxmox-<P>.tar.gz
#                                  the Python SDK, wheel and sdist (<P>: <V> in PEP 440 form)
#   talos-proxmox-pulumi-<V>.tgz   the Node.js SDK as `npm pack` makes it after tsc (JS + .d.ts)
#   sdk/go/                        the Go SDK at <V>, to compare with the checkout before tagging
#   schema.json                    the schema the stamped plugin serves; the SDKs come from it
#   SHA256SUMS                     of the archives and packages
#
# The SDKs are generated again from the stamped plugin's schema into a scratch directory; the
# checked-in sdk/ is never rewritten. The Go SDK is released by a tag (printed at the end).
#
# Usage: tools/release/release.sh [--platforms host|"os/arch ..."] VERSION OUTDIR
#
#   VERSION    x.y.z, or x.y.z-(alpha|beta|rc|dev).N (these map onto PEP 440 and npm alike)
#   OUTDIR     created; must be absent or empty
#   --platforms  default "linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"; "host" builds
#              this machine's only (the release test)
#
# Environment: PULUMI (the CLI, for `package get-schema`; default pulumi on PATH), GO, PYTHON,
# TALOS_PROXMOX_TOOLCHAIN_DIR (cache root, as tools/toolchain/build.sh: the Python build tools'
# virtualenv is kept there). Needs go, node/npm, python3 and tar.
set -euo pipefail

# Python build tools, pinned: the virtualenv holding them is cached by these versions.
build_version=1.3.0
setuptools_version=80.9.0

platforms="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"
if [[ ${1:-} == --platforms ]]; then
	platforms=${2:?--platforms needs a value}
	shift 2
fi
[[ $# -eq 2 ]] || { sed -n '17,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
version=${1#v}
out=$2

step() { printf 'release [%3ds]: %s\n' "$SECONDS" "$*" >&2; }
die() { printf 'release: error: %s\n' "$*" >&2; exit 1; }

[[ $version =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-(alpha|beta|rc|dev)\.(0|[1-9][0-9]*))?$ ]] ||
	die "version $version: want x.y.z or x.y.z-(alpha|beta|rc|dev).N"

GO=${GO:-go}
PULUMI=${PULUMI:-pulumi}
PYTHON=${PYTHON:-python3}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
host="$($GO env GOOS)/$($GO env GOARCH)"
[[ $platforms == host ]] && platforms=$host

mkdir -p "$out"
out=$(cd "$out" && pwd)
[[ -z $(ls -A "$out") ]] || die "$out is not empty"
work=$(mktemp -d "${TMPDIR:-/tmp}/release.XXXXXX")
trap 'rm -rf "$work"' EXIT

plugin=pulumi-resource-talos-proxmox
module=github.com/talos-proxmox/pulumi-talos-proxmox

# --- plugin ---------------------------------------------------------------------------------------

# build_plugin <os/arch>: the stamped binary in $work/plugin/<os>-<arch>/.
build_plugin() {
	local os=${1%/*} arch=${1#*/}
	step "plugin $os/$arch"
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch GOWORK=off "$GO" -C "$root" build -trimpath \
		-ldflags "-s -w -X $module/provider.releaseVersion=$version" \
		-o "$work/plugin/$os-$arch/$plugin" ./provider/cmd/$plugin
}

# Reproducible archive members where GNU tar allows it (BSD tar: plain).
tar_flags=()
if tar --version 2>/dev/null | grep -q GNU; then
	tar_flags=(--owner=0 --group=0 --numeric-owner --sort=name
		--mtime="@$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)")
fi

for p in $platforms; do
	build_plugin "$p"
	dir=$work/plugin/${p%/*}-${p#*/}
	files=("$plugin")
	for f in README.md LICENSE; do
		if [[ -f $root/$f ]]; then
			cp "$root/$f" "$dir/"
			files+=("$f")
		fi
	done
	tar "${tar_flags[@]}" -C "$dir" -cf - "${files[@]}" | gzip -n >"$out/$plugin-v$version-${p%/*}-${p#*/}.tar.gz"
done

# The schema comes from the plugin this machine can run, so it carries the stamped version.
[[ -x $work/plugin/${host%/*}-${host#*/}/$plugin ]] || build_plugin "$host"
step "schema of the stamped plugin"
"$PULUMI" package get-schema "$work/plugin/${host%/*}-${host#*/}/$plugin" >"$out/schema.json"
"$PYTHON" - "$out/schema.json" "$version" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
if s.get("version") != sys.argv[2]:
    sys.exit(f"release: the plugin reports version {s.get('version')!r}, not {sys.argv[2]!r}")
if not s.get("pluginDownloadURL"):
    sys.exit("release: the schema has no pluginDownloadURL")
EOF

# --- SDKs -----------------------------------------------------------------------------------------

step "generate the SDKs at $version"
"$GO" -C "$root/tools/sdkgen" run . -schema "$out/schema.json" -out "$work/sdk" >&2

# Python: wheel and sdist with pinned build tools, in a virtualenv cached by their versions.
cache=${TALOS_PROXMOX_TOOLCHAIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-talos-proxmox/toolchain}
pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
venv=$cache/release-python$pyver-build$build_version-setuptools$setuptools_version
if [[ ! -x $venv/bin/python ]]; then
	step "python: virtualenv with build==$build_version setuptools==$setuptools_version"
	mkdir -p "$cache"
	# Made beside where it lives, then moved in whole, so a killed run leaves no half virtualenv
	# (a moved virtualenv's scripts keep the old path: run its tools as `python -m`).
	rm -rf "$venv.new.$$"
	"$PYTHON" -m venv "$venv.new.$$"
	"$venv.new.$$/bin/pip" install --quiet --disable-pip-version-check "build==$build_version" "setuptools==$setuptools_version"
	[[ -e $venv ]] || mv "$venv.new.$$" "$venv"
	rm -rf "$venv.new.$$"
fi
step "python: wheel and sdist"
if ! "$venv/bin/python" -m build --no-isolation --sdist --wheel --outdir "$out" "$work/sdk/python" >"$work/python-build.log" 2>&1; then
	cat "$work/python-build.log" >&2
	die "building the Python packages failed"
fi

# Node.js: compiled with the package's own TypeScript, packed from bin/ as it is published.
pulumi_version=$(awk '$1 == "github.com/pulumi/pulumi/sdk/v3" { sub(/^v/, "", $2); print $2 }' "$work/sdk/go/go.mod")
step "nodejs: npm install (@pulumi/pulumi@$pulumi_version), tsc, npm pack"
(
	cd "$work/sdk/nodejs"
	npm install --no-audit --no-fund --no-save --loglevel=error "@pulumi/pulumi@$pulumi_version" >&2
	npx --no-install tsc
	cp package.json README.md bin/
	[[ ! -f $root/LICENSE ]] || cp "$root/LICENSE" bin/
	cd bin
	npm pack --loglevel=error --pack-destination "$out" >/dev/null
)

# Go: the module as it must be at the tag.
step "go: build the Go SDK"
mkdir -p "$out/sdk"
cp -R "$work/sdk/go" "$out/sdk/go"
(cd "$out/sdk/go" && GOWORK=off "$GO" build ./...)

# --- summary --------------------------------------------------------------------------------------

sha256() { if command -v sha256sum >/dev/null; then sha256sum "$@"; else shasum -a 256 "$@"; fi; }
packages=()
for f in "$out"/*; do
	if [[ -f $f && $f != */SHA256SUMS && $f != */schema.json ]]; then
		packages+=("${f##*/}")
	fi
done
(cd "$out" && sha256 "${packages[@]}" >SHA256SUMS)

tag=sdk/go/v$version
echo
echo "Release $version in $out:"
for f in "$out"/*; do
	[[ -f $f ]] || continue
	size=$(wc -c <"$f" | tr -d ' ')
	awk -v s="$size" -v n="${f##*/}" 'BEGIN { printf "  %12d  %7.1f MiB  %s\n", s, s / 1048576, n }'
done
echo "  sdk/go/  ($(find "$out/sdk/go" -type f | wc -l) files)"
echo
echo "Plugin:  GitHub release v$version of $module with the archives attached"
echo "         (pluginDownloadURL github://api.github.com/talos-proxmox/pulumi-talos-proxmox finds them there)."
echo "Go SDK:  module $module/sdk/go, tag $tag (git tag $tag && git push origin $tag)."
if diff -rq "$out/sdk/go" "$root/sdk/go" >/dev/null 2>&1; then
	echo "         The checkout's sdk/go is this release's: tag this commit."
else
	echo "         The checkout's sdk/go is not at $version: set provider/VERSION to $version, run"
	echo "         \`make codegen\`, commit, and tag that commit."
fi
