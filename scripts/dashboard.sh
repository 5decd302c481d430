#!/bin/sh
# dashboard.sh builds the web dashboard (dashboard/src → dashboard/dist).
#
#   scripts/dashboard.sh          build into dashboard/dist     (make dashboard)
#   scripts/dashboard.sh --check  build into a temporary directory and fail
#                                 if dashboard/dist differs      (make dashboard-check)
#
# npm ci installs the locked packages (skipped when node_modules is newer
# than the lock file); the build is byte-reproducible, so any difference
# means the committed dist is stale.
set -eu
mode=build
case "${1:-}" in
--check) mode=check ;;
"") ;;
*) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/../dashboard"

if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
	echo "dashboard: node and npm are needed to build dashboard/dist (apt-get install -y nodejs npm; node >= 20)" >&2
	exit 1
fi
if ! [ node_modules/.package-lock.json -nt package-lock.json ]; then
	npm ci --no-audit --no-fund >/dev/null
fi
if [ "$mode" = build ]; then
	npm run --silent build
	exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
DASHBOARD_OUT="$out/dist" npm run --silent build >/dev/null
if ! diff -r dist "$out/dist" >/dev/null; then
	echo "dashboard/dist is stale: run make dashboard and commit" >&2
	diff -rq dist "$out/dist" >&2 || true
	exit 1
fi
echo "dashboard-check: dashboard/dist is up to date"
