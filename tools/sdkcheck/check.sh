#!/usr/bin/env bash
# Checks the generated SDKs under sdk/ the way users consume them. Node.js and Python work in a
# scratch directory (removed on exit); nothing is written to the repository.
#
#   go      go build + go vet of sdk/go; go vet + go test of this module, a program that builds a
#           cluster with the Go SDK against a mocked engine and checks the inputs it sends
#   nodejs  npm install + tsc of sdk/nodejs; tsc of nodejs/index.ts and of examples/typescript
#           against the compiled package
#   python  venv with pulumi + mypy; pip install of sdk/python; import; mypy --strict of
#           python/program.py and of examples/python (also byte-compiled)
#
# Usage: tools/sdkcheck/check.sh [go|nodejs|python]...   (no argument: all three)
#
# The Pulumi SDK version is the one sdk/go/go.mod requires (pinned by tools/sdkgen), so the three
# languages are checked against the same release. Needs go, node/npm and python3 (PYTHON to override).
set -euo pipefail

mypy_version=2.4.1

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sdk=$(cd "$here/../../sdk" && pwd)
examples=$(cd "$here/../../examples" && pwd)
pulumi_version=$(awk '$1 == "github.com/pulumi/pulumi/sdk/v3" { sub(/^v/, "", $2); print $2 }' "$sdk/go/go.mod")
[[ -n $pulumi_version ]] || { echo "sdkcheck: no github.com/pulumi/pulumi/sdk/v3 in $sdk/go/go.mod" >&2; exit 1; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/sdkcheck.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# step announces the next step with the seconds spent so far.
step() { printf 'sdkcheck [%3ds]: %s\n' "$SECONDS" "$*" >&2; }

check_go() {
	step "go: build and vet sdk/go"
	(cd "$sdk/go" && go build ./... && go vet ./...)
	step "go: program against the Go SDK (mocked engine)"
	(cd "$here" && go vet ./... && go test -count=1 ./...)
}

check_nodejs() {
	local pkg=$scratch/nodejs name
	cp -R "$sdk/nodejs" "$pkg"
	rm -rf "${pkg:?}/node_modules" "${pkg:?}/bin"
	step "nodejs: npm install with @pulumi/pulumi@$pulumi_version"
	(cd "$pkg" && npm install --no-audit --no-fund --no-save "@pulumi/pulumi@$pulumi_version")
	step "nodejs: tsc"
	(cd "$pkg" && npx --no-install tsc)
	# Lay the package out as npm publishes it (bin/ plus package.json) and install it into its own
	# node_modules, so that the program resolves it the way a user's program does.
	name=$(cd "$pkg" && node -p 'require("./package.json").name')
	cp "$pkg/package.json" "$pkg/README.md" "$pkg/bin/"
	mkdir -p "$(dirname "$pkg/node_modules/$name")"
	ln -s "$pkg/bin" "$pkg/node_modules/$name"
	cp -R "$here/nodejs" "$pkg/program"
	step "nodejs: tsc of a program using $name"
	(cd "$pkg" && npx --no-install tsc -p program)
	# The TypeScript example, type-checked as its own project against the same package.
	cp -R "$examples/typescript" "$pkg/example"
	rm -rf "${pkg:?}/example/node_modules"
	step "nodejs: tsc of examples/typescript"
	(cd "$pkg" && npx --no-install tsc --noEmit -p example)
}

check_python() {
	local venv=$scratch/venv pip
	step "python: venv with pulumi==$pulumi_version mypy==$mypy_version"
	"${PYTHON:-python3}" -m venv "$venv"
	pip=("$venv/bin/pip" --quiet --disable-pip-version-check)
	"${pip[@]}" install "pulumi==$pulumi_version" "mypy==$mypy_version"
	# pip builds in the source tree (build/, *.egg-info): install from a copy.
	cp -R "$sdk/python" "$scratch/python"
	step "python: pip install sdk/python"
	"${pip[@]}" install "$scratch/python"
	step "python: import"
	(cd "$scratch" && "$venv/bin/python" -c 'import pulumi_talos_proxmox')
	step "python: mypy --strict of a program using pulumi_talos_proxmox"
	(cd "$scratch" && "$venv/bin/mypy" --strict --cache-dir "$scratch/mypy-cache" "$here/python/program.py")
	step "python: byte-compile and mypy --strict of examples/python"
	cp -R "$examples/python" "$scratch/example"
	(cd "$scratch/example" && "$venv/bin/python" -m py_compile __main__.py &&
		"$venv/bin/mypy" --strict --cache-dir "$scratch/mypy-cache" __main__.py)
}

langs=("$@")
[[ ${#langs[@]} -gt 0 ]] || langs=(go nodejs python)
for lang in "${langs[@]}"; do
	case $lang in
	go | nodejs | python) "check_$lang" ;;
	*) echo "sdkcheck: unknown language $lang (go, nodejs or python)" >&2; exit 2 ;;
	esac
done
step "ok: ${langs[*]}"
