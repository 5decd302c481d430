// Package udfs holds the example operators ("user-defined functions") that
// ship with Eddy, each written in Go, in C and in Rust (<example>/rust,
// with sdk/rust) with the same algorithm so that the guest SDKs can be
// compared with each other and with native Go:
//
//   - project: a JSON field projector and filter (project/projection,
//     project/go, project/c);
//   - split: a word splitter, one record in and many out (split/splitter,
//     split/go, split/c);
//   - counter: a running count per key in keyed state (counter/counting,
//     counter/go, counter/c);
//   - country-change: a card-fraud rule with keyed state and event-time
//     timers (countrychange/detector, countrychange/go, countrychange/c);
//   - card-stats: an aggregate module for a window node, each window's
//     transaction count, total, largest amount and distinct countries
//     (cardstats/stats, cardstats/go, cardstats/c);
//   - top-n: a window function, each window's n elements with the largest
//     value of a field (topn/ranking, topn/go, topn/c).
//
// project, split and top-n declare ABI version 1; counter and
// country-change use keyed state, declare version 2 and need a keyed node;
// card-stats is an aggregate module, declares version 3 and runs only as a
// window node's aggregate (top-n as its apply).
//
// The built modules in build/ are test fixtures, committed next to their
// sources; `make -C udfs` rebuilds them. This package itself has no code:
// its tests run every built module against the native Go algorithm, the
// aggregate also through the real host (package host).
package udfs
