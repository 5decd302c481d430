#!/bin/sh
# versitygw.sh installs the S3-compatible server the tests start (versitygw,
# Apache-2.0) into a cache directory outside the repository and prints the
# binary's path as its only line on standard output.
#
#   scripts/versitygw.sh        build once (≈ 2 min cold), then just print the path
#
# The cache is ${EDDY_TOOLS:-$HOME/.cache/eddy-tools}/versitygw-$VERSION/, so a
# version bump builds next to the old one instead of reusing it. Idempotent and
# safe to run concurrently (several test packages may ask at once): one
# process builds under a lock, the others wait and reuse its result. The
# binary appears only complete (built in a temporary directory, then renamed).
#
# storage/internal/s3test calls this script when the binary is missing; CI
# calls it up front to warm the cache.
set -eu

VERSION=v1.8.0
PKG=github.com/versity/versitygw/cmd/versitygw
GO=${GO:-go}
TOOLS=${EDDY_TOOLS:-${HOME:?}/.cache/eddy-tools}
DIR=$TOOLS/versitygw-$VERSION
BIN=$DIR/versitygw

if [ -x "$BIN" ]; then
	echo "$BIN"
	exit 0
fi

mkdir -p "$TOOLS"
TOOLS=$(cd "$TOOLS" && pwd) # GOBIN must be absolute
DIR=$TOOLS/versitygw-$VERSION
BIN=$DIR/versitygw

build() {
	[ -x "$BIN" ] && return 0 # another process built it while we waited
	tmp=$(mktemp -d "$TOOLS/.versitygw-$VERSION.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	echo "versitygw.sh: building $PKG@$VERSION into $DIR (takes a few minutes once)" >&2
	start=$(date +%s)
	# Outside any module, so that the repository's go.mod plays no part;
	# GOFLAGS from the Makefile (-trimpath) is harmless here.
	(cd "$tmp" && GOBIN="$tmp/bin" GOTOOLCHAIN=local "$GO" install "$PKG@$VERSION") >&2
	mkdir -p "$DIR"
	mv "$tmp/bin/versitygw" "$BIN.tmp.$$"
	mv "$BIN.tmp.$$" "$BIN"
	echo "versitygw.sh: built in $(($(date +%s) - start)) s" >&2
}

if command -v flock >/dev/null 2>&1; then
	exec 9>"$TOOLS/.versitygw-$VERSION.lock"
	flock 9
	build
else
	build
fi
echo "$BIN"
