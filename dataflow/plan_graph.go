package dataflow

import (
	"fmt"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
)

// GraphNode is one node of a planned job, for display (the dashboard's job
// graph).
type GraphNode struct {
	Name        string
	Kind        string
	Parallelism int
	// ChainHead names the task chain that runs the node: its head node,
	// which the chain's task ids start with.
	ChainHead string
}

// GraphEdge is one input of a node.
type GraphEdge struct {
	From, To string
	// Kind is "forward", "rebalance" or "hash".
	Kind string
	// Chained edges are plain calls inside one task.
	Chained bool
	// Port is the producer's side output ("" for its main output).
	Port string
}

// PlanGraph returns the nodes of spec (in spec order) and its edges as the
// runtime wires them, so that what the dashboard draws is what runs.
func PlanGraph(spec *jobspec.Spec) ([]GraphNode, []GraphEdge, error) {
	vs, chains, err := plan(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("job %s: %w", spec.Name, err)
	}
	chainOf := map[*vertex]*chain{}
	for _, c := range chains {
		for _, v := range c.vertices {
			chainOf[v] = c
		}
	}
	// Edges between chains carry the partitioning plan chose; edges inside
	// a chain are forward by construction.
	modes := map[[2]*vertex]partitioning{}
	for _, c := range chains {
		for _, o := range c.outputs {
			modes[[2]*vertex{o.from, o.to.head()}] = o.mode
		}
	}
	nodes := make([]GraphNode, len(vs))
	var edges []GraphEdge
	for i, v := range vs {
		nodes[i] = GraphNode{Name: v.node.Name, Kind: nodeKind(v.node), Parallelism: v.parallelism,
			ChainHead: chainOf[v].head().node.Name}
		for _, e := range v.inputs {
			ge := GraphEdge{From: e.from.node.Name, To: v.node.Name, Port: e.port, Kind: "forward"}
			ge.Chained = chainOf[e.from] == chainOf[v]
			if !ge.Chained {
				switch modes[[2]*vertex{e.from, v}] {
				case hashKey:
					ge.Kind = "hash"
				case rebalance:
					ge.Kind = "rebalance"
				}
			}
			edges = append(edges, ge)
		}
	}
	return nodes, edges, nil
}
