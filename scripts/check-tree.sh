#!/usr/bin/env bash
# check-tree: fail when git tracks a build output — a compiled executable,
# shared library, object file or archive (ELF, Mach-O, PE, ar) anywhere, or
# a Wasm binary outside the committed fixture folders, whose rules rebuild
# them (make udfs, make -C host/testdata) and which make check compares.
# Reads the first bytes of each tracked file, so it needs nothing but git
# and coreutils.
set -euo pipefail
cd "$(dirname "$0")/.."

fixtures='^(udfs/build|host/testdata)/[^/]+\.wasm$'
bad=()
while IFS= read -r -d '' f; do
	[ -f "$f" ] || continue
	magic=$(head -c 8 -- "$f" | od -An -tx1 | tr -d ' \n')
	kind=
	case "$magic" in
	7f454c46*) kind="ELF executable or object" ;;
	feedface* | feedfacf* | cefaedfe* | cffaedfe* | cafebabe*) kind="Mach-O binary" ;;
	4d5a*) kind="PE executable" ;;
	213c617263683e0a*) kind="ar archive" ;;
	0061736d*) [[ "$f" =~ $fixtures ]] || kind="Wasm binary outside the fixture folders" ;;
	esac
	case "$f" in
	*.o | *.a | *.so | *.dylib | *.dll | *.exe | *.test) kind=${kind:-"build output by its name"} ;;
	esac
	[ -n "$kind" ] && bad+=("$f ($kind)")
done < <(git ls-files -z)

if [ ${#bad[@]} -gt 0 ]; then
	echo "tracked build outputs (remove them with git rm --cached; .gitignore keeps them out):"
	printf '  %s\n' "${bad[@]}"
	exit 1
fi
