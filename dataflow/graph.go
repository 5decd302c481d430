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
	inputs      []edge
	// consumers per output port: "" is the main output, other ports are
	// side outputs such as a window's late_output.
	consumers map[string][]*vertex
	stats     *NodeStats
}

// edge is one input of a vertex: the producing vertex and its port.
type edge struct {
	from *vertex
	port string
}

// partitioning says how an edge spreads batches over the next subtasks.
type partitioning int

const (
	// forward keeps subtask i → i (equal parallelism, not keyed).
	forward partitioning = iota
	// rebalance sends whole batches round-robin.
	rebalance
	// hashKey sends each record to the subtask owning its key group.
	hashKey
)

// chain is a run of vertices connected by forward edges of equal
// parallelism, executed as plain calls inside one goroutine per subtask.
type chain struct {
	id          int
	vertices    []*vertex
	parallelism int
	// outputs leave the chain: from its last vertex's main port, or from
	// any vertex's side port.
	outputs []*output
	// channels is the number of producers feeding each subtask's input
	// queue; every one of them ends with an end-of-stream.
	channels int
	// inputOf is, for each channel, the index of the head's input it
	// carries: what a two-input operator (a join) is told with each batch.
	inputOf []int
}

// output is an edge from a vertex of one chain to the head of another.
type output struct {
	from *vertex
	port string
	// producer is the chain from belongs to; to is the consuming chain.
	producer *chain
	to       *chain
	mode     partitioning
	// channelBase is the first channel index of this edge at the target's
	// input queue; a sender adds its subtask on non-forward edges.
	channelBase int
	// keyBy is the field records are keyed by on a hashKey edge: the
	// head's key_by, or a join's key for this input.
	keyBy string
}

func (c *chain) head() *vertex { return c.vertices[0] }

// taskID names subtask s of c as deployments do: the head node's name (node
// names are unique) and the subtask, "per_card[3]".
func (c *chain) taskID(s int) string { return fmt.Sprintf("%s[%d]", c.head().node.Name, s) }

// edge names o on the wire (eddyv1.ChannelOpen.edge): the producing node,
// and its port for a side output, "per_card" or "per_card:late".
func (o *output) edge() string {
	if o.port == "" {
		return o.from.node.Name
	}
	return o.from.node.Name + ":" + o.port
}

// channel is the index, at the consumer's input gate, of the channel from
// producer subtask p over o.
func (o *output) channel(p int) int {
	if o.mode == forward {
		return o.channelBase
	}
	return o.channelBase + p
}
func (c *chain) tail() *vertex { return c.vertices[len(c.vertices)-1] }

// plan resolves the spec into vertices and chains them. A vertex joins the
// chain of its input when it has exactly one input, on its main port, is
// that port's only consumer, runs at the same parallelism and is not keyed
// (keying redistributes records): then no queue is needed.
func plan(spec *jobspec.Spec) ([]*vertex, []*chain, error) {
	byName := map[string]edge{}
	vs := make([]*vertex, len(spec.Nodes))
	for i := range spec.Nodes {
		n := &spec.Nodes[i]
		v := &vertex{node: n, index: i, parallelism: spec.NodeParallelism(n), consumers: map[string][]*vertex{},
			stats: &NodeStats{Name: n.Name, Kind: nodeKind(n)}}
		v.stats.Parallelism = v.parallelism
		if n.Source != nil {
			v.stats.progress = newProgress(v.parallelism)
		}
		vs[i] = v
		byName[n.Name] = edge{from: v}
		if n.Window != nil && n.Window.LateOutput != "" {
			byName[n.Window.LateOutput] = edge{from: v, port: n.Window.LateOutput}
		}
	}
	for _, v := range vs {
		for _, in := range v.node.Input {
			e, ok := byName[in]
			if !ok {
				return nil, nil, fmt.Errorf("node %q: unknown input %q", v.node.Name, in)
			}
			v.inputs = append(v.inputs, e)
			e.from.consumers[e.port] = append(e.from.consumers[e.port], v)
		}
	}
	// Vertices come out of topological order so every input's chain exists.
	chainOf := map[*vertex]*chain{}
	var chains []*chain
	for _, v := range topoOrder(vs) {
		if len(v.inputs) == 1 && !v.node.Keyed() {
			e := v.inputs[0]
			u := e.from
			if e.port == "" && len(u.consumers[""]) == 1 && u.parallelism == v.parallelism && u.node.Sink == nil {
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
		head := c.head()
		for i, e := range head.inputs {
			up := chainOf[e.from]
			o := &output{from: e.from, port: e.port, producer: up, to: c, channelBase: c.channels, keyBy: head.node.InputKey(i)}
			switch {
			case head.node.Keyed():
				o.mode = hashKey
			case e.from.parallelism == c.parallelism:
				o.mode = forward
			default:
				o.mode = rebalance
			}
			if o.mode == forward {
				c.channels++
			} else {
				c.channels += e.from.parallelism
			}
			for len(c.inputOf) < c.channels {
				c.inputOf = append(c.inputOf, i)
			}
			up.outputs = append(up.outputs, o)
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
		for _, e := range v.inputs {
			visit(e.from)
		}
		out = append(out, v)
	}
	for _, v := range vs {
		visit(v)
	}
	return out
}

func nodeKind(n *jobspec.Node) string { return n.Kind() }
