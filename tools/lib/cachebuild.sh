# Sourced by tools/{toolchain,lint,kube,versitygw}/build.sh: what every build into the per-user cache
# shares. Not executable on its own.
#
# cache_start <prefix> <usage lines> "$@" parses the arguments (none, --print-dir, -h/--help),
# sets print_only, here (the calling script's directory) and GO, and moves stdout to fd 3 so
# that progress goes to stderr and stdout carries only the bin dir.

cache_start() {
	CACHE_PREFIX=$1
	CACHE_SCRIPT=${BASH_SOURCE[1]}
	local lines=$2
	shift 2

	exec 3>&1 1>&2

	print_only=false
	case "${1:-}" in
	"") ;;
	--print-dir) print_only=true ;;
	-h | --help)
		cache_usage "$lines" >&3
		exit 0
		;;
	*)
		echo "build.sh: unknown argument: $1" >&2
		cache_usage "$lines"
		exit 2
		;;
	esac

	here=$(cd "$(dirname "$CACHE_SCRIPT")" && pwd)
	GO=${GO:-go}
}

# cache_usage <lines>: the calling script's header comment, without the leading "# ".
cache_usage() { sed -n "$1p" "$CACHE_SCRIPT" | sed 's/^# \{0,1\}//'; }

log() { printf '%s: %s\n' "$CACHE_PREFIX" "$*" >&2; }
die() {
	printf '%s: error: %s\n' "$CACHE_PREFIX" "$*" >&2
	exit 1
}

sha256() {
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum | cut -d' ' -f1
	elif command -v shasum >/dev/null 2>&1; then
		shasum -a 256 | cut -d' ' -f1
	else
		openssl dgst -sha256 -r | cut -d' ' -f1
	fi
}

filesize() { wc -c <"$1" | tr -d ' '; }

# cache_lock <keydir> <key>: serialise concurrent builds of one key (a waiting run finds the
# build done) and, holding the lock, drop temp dirs that killed runs left behind.
cache_lock() {
	command -v flock >/dev/null 2>&1 || return 0
	exec 9>"$1/.lock"
	if ! flock -n 9; then
		log "another build of $2 is running; waiting for it"
		flock 9
	fi
	rm -rf "$1"/.tmp-*
}

# cache_done <bindir>: print the bin dir on the real stdout and end.
cache_done() {
	printf '%s\n' "$1" >&3
	exit 0
}

# go_tool_build builds one Go command pinned by the calling script's wrapper module (go.mod,
# go.sum, tools.go beside it) into the cache, unless it is there, and prints the bin dir on fd 3.
# The caller sets:
#   MOD, PKG, BIN   the module, the command's package, the binary's name
#   KEY_PREFIX      the cache key's first word (e.g. golangci-lint)
#   LDFLAGS_TMPL    -ldflags, @DATE@ standing for the release time the proxy records
#   RECIPE_EXTRA    lines added to the recipe (its hash is in the key), e.g. "cgo 0\n"
#   BUILD_CGO       0 to build without cgo (default: the go command's)
#   BUILD_FLAGS     more go build flags (e.g. -trimpath)
#   SMOKE           arguments the built binary must run with (empty: not run)
go_tool_build() {
	VERSION=$(awk -v m="$MOD" '$1 == "require" && $2 == m { print $3; exit } $1 == m && $2 ~ /^v/ { print $2; exit }' "$here/go.mod")
	[ -n "$VERSION" ] || die "$MOD is not required in $here/go.mod"
	# The module's go.sum hash stands in for the commit (the proxy has no VCS info).
	SUM=$(awk -v m="$MOD" -v v="$VERSION" '$1 == m && $2 == v { print $3; exit }' "$here/go.sum")
	[ -n "$SUM" ] || die "$MOD $VERSION has no hash in $here/go.sum"
	LDFLAGS_TMPL=${LDFLAGS_TMPL//@VERSION@/$VERSION}
	LDFLAGS_TMPL=${LDFLAGS_TMPL//@VERSION_BARE@/${VERSION#v}}
	LDFLAGS_TMPL=${LDFLAGS_TMPL//@SUM@/$SUM}

	local os arch key keydir bindir stamp
	os=$(uname -s | tr '[:upper:]' '[:lower:]')
	arch=$(uname -m)
	key="$KEY_PREFIX-$VERSION-$os-$arch-$(go_tool_recipe | sha256 | cut -c1-12)"
	keydir=${TALOS_PROXMOX_TOOLCHAIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-talos-proxmox/toolchain}/$key
	bindir=$keydir/bin
	stamp=$keydir/stamp

	! $print_only || cache_done "$bindir"

	# built: the stamp holds the size of an executable binary in bin/.
	built() { [ -f "$stamp" ] && [ -x "$bindir/$BIN" ] && [ "$(cat "$stamp")" = "$(filesize "$bindir/$BIN")" ]; }

	if ! built; then
		command -v "$GO" >/dev/null 2>&1 || die "'$GO' not found; a Go toolchain is needed"
		mkdir -p "$bindir"
		# Serialise concurrent runs on the same key (the second one then skips).
		cache_lock "$keydir" "$key"
	fi
	if ! built; then
		rm -f "$stamp"
		unset GOOS GOARCH
		export GOWORK=off
		[ -z "${BUILD_CGO:-}" ] || export CGO_ENABLED=$BUILD_CGO
		local start date
		start=$(date +%s)
		log "building $BIN $VERSION into $bindir ..."
		tmp=$(mktemp -d "$keydir/.tmp-XXXXXX")
		trap 'rm -rf "$tmp"' EXIT
		trap 'exit 130' INT
		trap 'exit 143' TERM
		date=$(cd "$here" && "$GO" list -mod=readonly -m -f '{{with .Time}}{{.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' "$MOD" 2>/dev/null) || true
		# shellcheck disable=SC2086 # BUILD_FLAGS is a list of flags
		(cd "$here" && "$GO" build -mod=readonly ${BUILD_FLAGS:-} -ldflags "${LDFLAGS_TMPL//@DATE@/${date:-unknown}}" -o "$tmp/$BIN" "$PKG")
		chmod 0755 "$tmp/$BIN"
		# shellcheck disable=SC2086 # SMOKE is a list of arguments
		[ -z "${SMOKE:-}" ] || "$tmp/$BIN" $SMOKE >/dev/null || die "the built $BIN does not run"
		filesize "$tmp/$BIN" >"$tmp/stamp"
		# rename(2) within one file system: bin/ never holds a half-written binary,
		# and the stamp is written only after the binary is in place.
		mv -f "$tmp/$BIN" "$bindir/$BIN"
		mv -f "$tmp/stamp" "$stamp"
		log "built $BIN in $(($(date +%s) - start))s ($(($(filesize "$bindir/$BIN") / 1048576)) MiB)"
	else
		log "$BIN $VERSION is up to date in $bindir"
	fi

	printf '%s\n' "$bindir" >&3
}

# go_tool_recipe is what the cache key hashes: the build's inputs.
go_tool_recipe() {
	local f
	printf 'pkg %s\nldflags %s\nbin %s\n%b' "$PKG" "$LDFLAGS_TMPL" "$BIN" "${RECIPE_EXTRA:-}"
	for f in go.mod go.sum tools.go; do
		printf 'file %s\n' "$f"
		cat "$here/$f"
	done
}
