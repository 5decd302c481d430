package coordinator_test

import (
	"context"
	"errors"
	"log"
	"os"
	"os/signal"

	"github.com/eddy-stream/eddy/scheduler/coordinator"
)

// How `eddy coordinator` wires a member. The Validator and Planner here are
// placeholders for host.Engine's compile+validate and for jobspec.Parse +
// dataflow.PlanTasks.
func Example() {
	cfg := coordinator.DefaultConfig()
	cfg.NodeID = "c1"
	cfg.APIAddr = "127.0.0.1:7700"
	cfg.Raft.BindAddr = "127.0.0.1:7701"
	cfg.Raft.DataDir = "/var/lib/eddy/c1"
	cfg.Raft.Bootstrap = true // the first member; the others set cfg.Join = "127.0.0.1:7700"

	c, err := coordinator.New(cfg, coordinator.Deps{
		Store: coordinator.DirStore{Dir: "/var/lib/eddy/blobs"}, // shared by every member
		Validator: func(ctx context.Context, name string, wasm []byte) error {
			return errors.New("wire host.Engine here")
		},
		Planner: func(spec []byte) ([]string, error) {
			return nil, errors.New("wire jobspec.Parse and dataflow.PlanTasks here")
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	log.Printf("coordinator serving on %s", c.Addr())
	<-ctx.Done()
	c.Stop()
}
