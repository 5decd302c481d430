// Package sdktest runs small test operators built with each guest SDK (Go
// in goguest/, C in testdata/cguest.c) under wazero, to check the SDKs' behaviour
// inside a real Wasm guest: failure messages, panics, emit rules, the
// eddy_alloc buffer. Variants cover keyed state (keyedguest/,
// testdata/ckeyed.c), aggregate modules (aggguest/, testdata/cagg.c) and
// window functions (windowguest/, testdata/cwindow.c). The tests build the
// guests themselves (go build, and clang when it is installed), so they
// need no committed fixtures. rust_test.go builds testdata/rustguest.rs
// with sdk/rust (when Debian's rustc is installed) and runs it through the
// real host package rather than the test host here, as fields_test.go
// does with fieldsguest/ (package fields, one- and two-input).
// json_test.go holds the C SDK's JSON reader to abi/jsonscan and
// encoding/json, built with and without -msimd128 (testdata/cjson.c).
//
// It holds no code for other packages; the example operators and their
// fixtures live in udfs/.
package sdktest
