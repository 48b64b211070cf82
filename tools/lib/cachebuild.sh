# Sourced by tools/{toolchain,lint,kube}/build.sh: what every build into the per-user cache
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
