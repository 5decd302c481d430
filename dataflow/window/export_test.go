package window

// DueEntries counts the entries of the firing index of fixed windows per
// key, stale ones included, for tests that bound them.
func (o *Operator) DueEntries() map[string]int {
	n := map[string]int{}
	for _, b := range o.idx.buckets {
		for _, e := range b.ents {
			n[string(b.keys[e.from:e.to])]++
		}
	}
	return n
}

// AddPerRecord makes an operator with a Wasm aggregate over sessions or
// global windows add record by record, the path batches must agree with.
func (o *Operator) AddPerRecord() { o.perRecord = true }

// BatchCounts are the rounds of batches of sessions with a Wasm aggregate
// (one eddy_agg_add call each), the records that a later round of their
// batch added (they merged sessions holding records of the round), that
// were added on their own (behind the watermark, one call each), and that
// merged stored sessions within a round.
func (o *Operator) BatchCounts() (rounds, deferred, alone, merges int64) {
	return o.rounds, o.deferredAdds, o.aloneAdds, o.roundMerges
}
