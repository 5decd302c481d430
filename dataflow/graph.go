package dataflow

import (
	"fmt"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
)

// vertex is one node of the job graph with its wiring resolved.
type vertex struct {
	node        *jobspec.Node
	index       int
	parallelism int
	inputs      []*vertex
	consumers   []*vertex
	stats       *NodeStats
}

// chain is a run of vertices connected by forward edges of equal
// parallelism, executed as plain calls inside one goroutine per subtask.
type chain struct {
	id          int
	vertices    []*vertex
	parallelism int
	// outputs are the chains fed by the last vertex of this chain.
	outputs []*chain
	// producers counts, per subtask of this chain, the upstream tasks that
	// send to it (each sends one end-of-stream).
	producers []int
}

func (c *chain) head() *vertex { return c.vertices[0] }
func (c *chain) tail() *vertex { return c.vertices[len(c.vertices)-1] }

// forward reports whether the edge from c to next keeps subtask i → i.
func (c *chain) forward(next *chain) bool { return c.parallelism == next.parallelism }

// plan resolves the spec into vertices and chains them. A vertex joins the
// chain of its input when it has exactly one input, is that input's only
// consumer and runs at the same parallelism: then no queue is needed.
func plan(spec *jobspec.Spec) ([]*vertex, []*chain, error) {
	byName := map[string]*vertex{}
	vs := make([]*vertex, len(spec.Nodes))
	for i := range spec.Nodes {
		n := &spec.Nodes[i]
		v := &vertex{node: n, index: i, parallelism: spec.NodeParallelism(n), stats: &NodeStats{Name: n.Name, Kind: nodeKind(n)}}
		v.stats.Parallelism = v.parallelism
		vs[i] = v
		byName[n.Name] = v
	}
	for _, v := range vs {
		for _, in := range v.node.Input {
			u, ok := byName[in]
			if !ok {
				return nil, nil, fmt.Errorf("node %q: unknown input %q", v.node.Name, in)
			}
			v.inputs = append(v.inputs, u)
			u.consumers = append(u.consumers, v)
		}
	}
	// Vertices come out of topological order so every input's chain exists.
	chainOf := map[*vertex]*chain{}
	var chains []*chain
	for _, v := range topoOrder(vs) {
		if len(v.inputs) == 1 {
			u := v.inputs[0]
			if len(u.consumers) == 1 && u.parallelism == v.parallelism && u.node.Sink == nil {
				c := chainOf[u]
				c.vertices = append(c.vertices, v)
				chainOf[v] = c
				continue
			}
		}
		c := &chain{id: len(chains), vertices: []*vertex{v}, parallelism: v.parallelism}
		chains = append(chains, c)
		chainOf[v] = c
	}
	for _, c := range chains {
		c.producers = make([]int, c.parallelism)
		for _, u := range c.head().inputs {
			up := chainOf[u]
			up.outputs = append(up.outputs, c)
			for i := range c.producers {
				if up.forward(c) {
					c.producers[i]++
				} else {
					c.producers[i] += up.parallelism
				}
			}
		}
	}
	return vs, chains, nil
}

func topoOrder(vs []*vertex) []*vertex {
	done := map[*vertex]bool{}
	var out []*vertex
	var visit func(v *vertex)
	visit = func(v *vertex) {
		if done[v] {
			return
		}
		done[v] = true
		for _, u := range v.inputs {
			visit(u)
		}
		out = append(out, v)
	}
	for _, v := range vs {
		visit(v)
	}
	return out
}

func nodeKind(n *jobspec.Node) string {
	switch {
	case n.Source != nil:
		return "source"
	case n.Sink != nil:
		return "sink"
	default:
		return "wasm"
	}
}
