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
