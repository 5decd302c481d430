#!/bin/sh
# protogen.sh generates the Go code of proto/**/*.proto with pinned tools.
#
#   scripts/protogen.sh          regenerate proto/ in place       (make proto)
#   scripts/protogen.sh --check  regenerate into a temporary directory and
#                                fail if proto/ differs           (make proto-check)
#
# The Makefile passes the pinned versions: PROTOC_VERSION (Debian's
# protobuf-compiler; the version is written into every generated file, so
# another protoc would change the output), PROTOC_GEN_GO_VERSION,
# PROTOC_GEN_GO_GRPC_VERSION, PROTOC_GEN_GRPC_GATEWAY_VERSION (the version
# of protoc-gen-grpc-gateway and protoc-gen-openapiv2, which make the REST
# gateway of the Control service and its OpenAPI description from the
# HTTP rules of proto/eddy/v1/control_http.yaml), and TOOLS (where the
# plugins are installed, one directory per version). Output is
# byte-identical for the same inputs.
set -eu

: "${PROTOC_VERSION:?}" "${PROTOC_GEN_GO_VERSION:?}" "${PROTOC_GEN_GO_GRPC_VERSION:?}" "${PROTOC_GEN_GRPC_GATEWAY_VERSION:?}" "${TOOLS:?}"
GO=${GO:-go}
mode=gen
case "${1:-}" in
--check) mode=check ;;
"") ;;
*) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.."

# Without the pinned protoc, --check cannot tell stale code from a version
# difference: it says so and succeeds; generating fails.
skip() {
	if [ "$mode" = check ]; then
		echo "proto-check: skipped: $1"
		exit 0
	fi
	echo "proto: $1" >&2
	exit 1
}
command -v protoc >/dev/null 2>&1 ||
	skip "protoc not found (apt-get install -y protobuf-compiler, version $PROTOC_VERSION)"
have=$(protoc --version)
[ "$have" = "libprotoc $PROTOC_VERSION" ] ||
	skip "protoc is \"$have\", want \"libprotoc $PROTOC_VERSION\" (Debian bookworm's protobuf-compiler)"

# plugin NAME PACKAGE VERSION: install once per version, print the path.
plugin() {
	dir="$TOOLS/$1@$3"
	if [ ! -x "$dir/$1" ]; then
		echo "installing $2@$3" >&2
		GOBIN="$dir" "$GO" install "$2@$3"
	fi
	echo "$dir/$1"
}
gen_go=$(plugin protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION")
gen_go_grpc=$(plugin protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION")
gen_gateway=$(plugin protoc-gen-grpc-gateway github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway "$PROTOC_GEN_GRPC_GATEWAY_VERSION")
gen_openapi=$(plugin protoc-gen-openapiv2 github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2 "$PROTOC_GEN_GRPC_GATEWAY_VERSION")

# Generate into a fresh directory in both modes, so that a .pb.go whose
# .proto was removed is detected (check) or deleted (gen).
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
files=$(cd proto && find . -name '*.proto' | sed 's|^\./||' | LC_ALL=C sort)
(cd proto && protoc -I . \
	--plugin=protoc-gen-go="$gen_go" --go_out="$out" --go_opt=paths=source_relative \
	--plugin=protoc-gen-go-grpc="$gen_go_grpc" --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
	$files)
# The REST gateway of Control and its OpenAPI description, routed by the
# HTTP rules of control_http.yaml rather than annotations in the .proto.
http_rules=eddy/v1/control_http.yaml
(cd proto && protoc -I . \
	--plugin=protoc-gen-grpc-gateway="$gen_gateway" --grpc-gateway_out="$out" \
	--grpc-gateway_opt=paths=source_relative,grpc_api_configuration=$http_rules \
	--plugin=protoc-gen-openapiv2="$gen_openapi" --openapiv2_out="$out" \
	--openapiv2_opt=grpc_api_configuration=$http_rules \
	eddy/v1/control.proto)

generated() { (cd "$1" && find . \( -name '*.pb.go' -o -name '*.pb.gw.go' -o -name '*.swagger.json' \) | sed 's|^\./||' | LC_ALL=C sort); }

if [ "$mode" = check ]; then
	status=0
	generated proto >"$out/.committed"
	generated "$out" >"$out/.regenerated"
	if ! cmp -s "$out/.committed" "$out/.regenerated"; then
		echo "proto-check: the set of generated files differs:" >&2
		diff -u --label committed --label regenerated "$out/.committed" "$out/.regenerated" >&2 || true
		status=1
	fi
	for f in $(cat "$out/.regenerated"); do
		[ -f "proto/$f" ] || continue
		if ! cmp -s "proto/$f" "$out/$f"; then
			echo "proto-check: proto/$f is stale:" >&2
			diff -u "proto/$f" "$out/$f" | head -40 >&2 || true
			status=1
		fi
	done
	if [ $status -ne 0 ]; then
		echo "proto-check: run make proto and commit the result" >&2
		exit 1
	fi
	echo "proto-check: generated code is up to date"
	exit 0
fi

for f in $(generated proto); do
	[ -f "$out/$f" ] || { echo "removing stale proto/$f"; rm -f "proto/$f"; }
done
for f in $(generated "$out"); do
	cmp -s "$out/$f" "proto/$f" 2>/dev/null || { mkdir -p "$(dirname "proto/$f")"; cp "$out/$f" "proto/$f"; echo "wrote proto/$f"; }
done
