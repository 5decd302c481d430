//go:build invariants

package stream

// invariants turns on the checks that cost time (see pool.go): built
// with -tags invariants, as make test builds the runtime's suites once.
const invariants = true
