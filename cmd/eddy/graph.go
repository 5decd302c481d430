package main

import (
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

// jobGraph is the coordinator's Deps.Graph: the planner's view of a spec,
// so the dashboard draws the edges the runtime wires, not a guess from the
// YAML.
func jobGraph(specYAML []byte) (*eddyv1.JobGraph, error) {
	spec, err := jobspec.Parse(specYAML, "")
	if err != nil {
		return nil, err
	}
	nodes, edges, err := dataflow.PlanGraph(spec)
	if err != nil {
		return nil, err
	}
	g := &eddyv1.JobGraph{}
	for _, n := range nodes {
		g.Nodes = append(g.Nodes, &eddyv1.GraphNode{Name: n.Name, Kind: n.Kind, Parallelism: uint32(n.Parallelism), ChainHead: n.ChainHead})
	}
	for _, e := range edges {
		g.Edges = append(g.Edges, &eddyv1.GraphEdge{From: e.From, To: e.To, Kind: e.Kind, Chained: e.Chained, Port: e.Port})
	}
	return g, nil
}
