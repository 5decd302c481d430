//go:build !two

package main

import eddy "github.com/eddy-stream/eddy/sdk/go"

func (g *guest) Process(r *eddy.Record) error { return g.echo(r, r.Key) }

func init() { eddy.Register(&guest{}) }
