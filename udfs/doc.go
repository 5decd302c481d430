// Package udfs holds the example operators ("user-defined functions") that
// ship with Eddy, each written in Go and in C with the same algorithm so
// that the two guest SDKs can be compared with each other and with native
// Go:
//
//   - project: a JSON field projector and filter (project/projection,
//     project/go, project/c);
//   - split: a word splitter, one record in and many out (split/splitter,
//     split/go, split/c).
//
// The built modules in build/ are test fixtures, committed next to their
// sources; `make -C udfs` rebuilds them. This package itself has no code:
// its tests run every built module against the native Go algorithm.
package udfs
