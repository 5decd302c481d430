//go:build two

package main

import (
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/keyed/co"
)

func (g *guest) ProcessLeft(r *eddy.Record) error { return g.echo(r, r.Key) }

func (g *guest) ProcessRight(r *eddy.Record) error {
	return g.echo(r, append([]byte("r:"), r.Key...))
}

func init() { co.Register(&guest{}) }
