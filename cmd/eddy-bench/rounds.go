package main

import (
	"fmt"
	"sort"
)

// rounds measures every variant once per round, runs rounds in all, so
// that a drift in the speed of a shared machine falls on all variants of a
// round alike rather than on whichever variant ran last. measure returns a
// cost (nanoseconds per record: lower is better). rounds returns each
// variant's median cost and, for each variant, the median over the rounds
// of its throughput relative to variant 0 in the same round.
func rounds(runs, variants int, measure func(variant int) (float64, error)) (cost, ratio []float64, err error) {
	costs := make([][]float64, variants)
	ratios := make([][]float64, variants)
	for r := 0; r < runs; r++ {
		round := make([]float64, variants)
		for v := 0; v < variants; v++ {
			if round[v], err = measure(v); err != nil {
				return nil, nil, err
			}
			costs[v] = append(costs[v], round[v])
		}
		for v := 0; v < variants; v++ {
			ratios[v] = append(ratios[v], round[0]/round[v])
		}
	}
	median := func(xs []float64) float64 {
		sort.Float64s(xs)
		return xs[len(xs)/2]
	}
	cost = make([]float64, variants)
	ratio = make([]float64, variants)
	for v := 0; v < variants; v++ {
		cost[v], ratio[v] = median(costs[v]), median(ratios[v])
	}
	return cost, ratio, nil
}

// printRatios prints each module's throughput over native's, the median
// of the per-round ratios from rounds; variant 0 is native and the modules
// follow in the order C, Go, Rust, AssemblyScript.
func printRatios(ratio []float64) {
	for i, name := range []string{"C", "Go", "Rust", "AS"} {
		fmt.Printf("  ratio %c/a (%s module / native, throughput) %.2f\n", 'b'+i, name, ratio[i+1])
	}
}
