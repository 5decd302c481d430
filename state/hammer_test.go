package state

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestHammer runs tasks on one backend concurrently, as a worker's slots
// do: two subtasks of one operator and two other operators, each checking
// its state against a model. Run with -race.
func TestHammer(t *testing.T) {
	ops := 3000
	if testing.Short() {
		ops = 500
	}
	for _, bk := range backendKinds {
		t.Run(bk.name, func(t *testing.T) {
			backend := bk.open(t, time.Now)
			tasks := []struct {
				scope  Scope
				groups Range
			}{
				{testScope, KeyGroupRange(0, 2, testMaxP)},
				{testScope, KeyGroupRange(1, 2, testMaxP)},
				{Scope{"default", "job", "other"}, Range{0, testMaxP}},
				{Scope{"tenant2", "job", "op"}, Range{0, testMaxP}},
			}
			var wg sync.WaitGroup
			errs := make(chan error, len(tasks))
			for i, task := range tasks {
				s, err := backend.OpenTask(task.scope, testMaxP, task.groups)
				must(t, err)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer s.Close()
					if err := hammer(s, task.groups, uint64(i), ops); err != nil {
						errs <- fmt.Errorf("task %d (%s %s): %w", i, task.scope, task.groups, err)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

func hammer(s Store, groups Range, seed uint64, ops int) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	var keys [][]byte
	for i := 0; len(keys) < 50; i++ {
		k := []byte("k" + strconv.Itoa(i))
		if groups.Contains(KeyGroup(k, testMaxP)) {
			keys = append(keys, k)
		}
	}
	values := map[string]string{}
	lists := map[string][]string{}
	maps := map[string]map[string]string{}
	timers := map[string]int64{}
	for op := range ops {
		k := keys[rng.IntN(len(keys))]
		v := strconv.Itoa(op)
		switch rng.IntN(8) {
		case 0:
			if err := s.ValuePut("v", k, nil, []byte(v), 0); err != nil {
				return err
			}
			values[string(k)] = v
		case 1:
			got, ok, err := s.ValueGet("v", k, nil, nil)
			if err != nil {
				return err
			}
			if want, has := values[string(k)]; ok != has || string(got) != want {
				return fmt.Errorf("value %s = %q, %v; want %q, %v", k, got, ok, want, has)
			}
		case 2:
			if err := s.ListAppend("l", k, nil, []byte(v), 0); err != nil {
				return err
			}
			lists[string(k)] = append(lists[string(k)], v)
		case 3:
			var got []string
			if err := s.ListGet("l", k, nil, func(b []byte) error { got = append(got, string(b)); return nil }); err != nil {
				return err
			}
			if !slices.Equal(got, lists[string(k)]) {
				return fmt.Errorf("list %s = %v, want %v", k, got, lists[string(k)])
			}
		case 4:
			uk := strconv.Itoa(rng.IntN(5))
			if err := s.MapPut("m", k, nil, []byte(uk), []byte(v), 0); err != nil {
				return err
			}
			if maps[string(k)] == nil {
				maps[string(k)] = map[string]string{}
			}
			maps[string(k)][uk] = v
		case 5:
			n := 0
			err := s.MapIter("m", k, nil, func(uk, b []byte) error {
				n++
				if want := maps[string(k)][string(uk)]; string(b) != want {
					return fmt.Errorf("map %s[%s] = %q, want %q", k, uk, b, want)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if n != len(maps[string(k)]) {
				return fmt.Errorf("map %s has %d entries, want %d", k, n, len(maps[string(k)]))
			}
		case 6:
			ts := rng.Int64N(1000)
			if err := s.TimerRegister(EventTime, k, nil, ts); err != nil {
				return err
			}
			timers[fmt.Sprint(ts, "/", string(k))] = ts
		case 7:
			upTo := rng.Int64N(1000)
			last := int64(-1 << 63)
			err := s.PopTimers(EventTime, upTo, func(tm Timer) error {
				id := fmt.Sprint(tm.Timestamp, "/", string(tm.Key))
				if _, set := timers[id]; !set || tm.Timestamp > upTo || tm.Timestamp < last {
					return fmt.Errorf("unexpected timer %s (upTo %d, last %d)", id, upTo, last)
				}
				delete(timers, id)
				last = tm.Timestamp
				return nil
			})
			if err != nil {
				return err
			}
			for id, ts := range timers {
				if ts <= upTo {
					return fmt.Errorf("timer %s not fired by PopTimers(%d)", id, upTo)
				}
			}
		}
	}
	return nil
}
