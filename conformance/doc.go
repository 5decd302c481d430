// Package conformance holds the language-neutral conformance suite of the
// example operators: its test runs every language's build of every
// example (udfs/build/<example>-<lang>.wasm) over the vectors under
// testdata/conformance/<example>/<case>.json through the real host and
// dataflow (package dataflow/localrun), and compares the output byte for
// byte. A behaviour one SDK gets wrong fails as <example>/<lang>/<case>.
//
// The vectors are data, not code: an SDK in a new language passes the
// suite when its builds of the examples do. This package has no code of
// its own; it is not a test framework for user modules (that is
// `eddy test`).
package conformance
