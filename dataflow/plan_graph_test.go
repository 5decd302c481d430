package dataflow_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/dataflow"
)

func TestPlanGraph(t *testing.T) {
	spec := parse(t, strings.ReplaceAll(splitJob, "$DIR", t.TempDir()))
	nodes, edges, err := dataflow.PlanGraph(spec)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range nodes {
		got = append(got, fmt.Sprintf("%s/%s/%d/%s", n.Name, n.Kind, n.Parallelism, n.ChainHead))
	}
	for _, e := range edges {
		got = append(got, fmt.Sprintf("%s->%s:%s chained=%v port=%q", e.From, e.To, e.Kind, e.Chained, e.Port))
	}
	want := []string{
		"txns/source/2/txns",
		"counts/wasm/2/counts",
		"counts_out/sink/2/counts",
		"per_card/window/2/per_card",
		"results/sink/2/per_card",
		`txns->counts:hash chained=false port=""`,
		`counts->counts_out:forward chained=true port=""`,
		`txns->per_card:hash chained=false port=""`,
		`per_card->results:forward chained=true port=""`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("graph\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	// Every task's chain head is a node, and every node's chain is one of
	// PlanTasks' chains: the dashboard maps task metrics to nodes this way.
	tasks, err := dataflow.PlanTasks(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		found := false
		for _, ts := range tasks {
			if ts.Chain[0] == n.ChainHead && slices.Contains(ts.Chain, n.Name) {
				found = true
			}
		}
		if !found {
			t.Errorf("node %s: chain head %s runs no task with it", n.Name, n.ChainHead)
		}
	}
}
