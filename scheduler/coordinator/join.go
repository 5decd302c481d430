package coordinator

import (
	"context"
	"fmt"
	"time"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/proto/rpc"
	"google.golang.org/grpc/metadata"
)

// join asks the member at Config.Join to add this one to the group,
// retrying with backoff while no leader is known or the member is
// unreachable.
func (c *Coordinator) join(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.JoinTimeout)
	defer cancel()
	target := c.cfg.Join
	backoff := 100 * time.Millisecond
	for {
		err := c.askToJoin(ctx, target)
		if err == nil {
			c.log.Info("joined the group", "via", target)
			return nil
		}
		if nl, ok := rpc.LeaderFromError(err); ok && nl.GetLeaderAddress() != "" {
			target = nl.GetLeaderAddress()
		}
		c.log.Info("join: retrying", "via", target, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("join through %s: %w (last error: %v)", c.cfg.Join, ctx.Err(), err)
		case <-c.ctx.Done():
			return fmt.Errorf("join through %s: stopped", c.cfg.Join)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// askToJoin calls Control.Join at addr with this member's addresses.
func (c *Coordinator) askToJoin(ctx context.Context, addr string) error {
	conn, err := c.conns.Get(addr)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if c.cfg.JoinToken != "" {
		cctx = metadata.AppendToOutgoingContext(cctx, rpc.AuthorizationKey, "Bearer "+c.cfg.JoinToken)
	}
	_, err = eddyv1.NewControlClient(conn).Join(cctx, &eddyv1.JoinRequest{
		NodeId:      c.cfg.NodeID,
		RaftAddress: c.node.Addr(),
		ApiAddress:  c.addr,
	})
	return err
}
