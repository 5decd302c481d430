package placement

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestPlace(t *testing.T) {
	tests := []struct {
		name    string
		tasks   []string
		workers []Worker
		want    map[string]string
	}{
		{
			name: "no tasks",
			want: map[string]string{},
		},
		{
			name:    "round robin over empty workers",
			tasks:   []string{"t1", "t2", "t3", "t4"},
			workers: []Worker{{ID: "w1", Slots: 2}, {ID: "w2", Slots: 2}},
			want:    map[string]string{"t1": "w1", "t2": "w2", "t3": "w1", "t4": "w2"},
		},
		{
			name:    "ties broken by id whatever the input order",
			tasks:   []string{"t1", "t2", "t3"},
			workers: []Worker{{ID: "c", Slots: 4}, {ID: "a", Slots: 4}, {ID: "b", Slots: 4}},
			want:    map[string]string{"t1": "a", "t2": "b", "t3": "c"},
		},
		{
			name:    "fewest used slots first",
			tasks:   []string{"t1", "t2", "t3", "t4"},
			workers: []Worker{{ID: "a", Slots: 4, Used: 2}, {ID: "b", Slots: 4}},
			want:    map[string]string{"t1": "b", "t2": "b", "t3": "a", "t4": "b"},
		},
		{
			name:    "full workers skipped",
			tasks:   []string{"t1", "t2"},
			workers: []Worker{{ID: "a", Slots: 2, Used: 2}, {ID: "b", Slots: 1}, {ID: "c", Slots: 1}},
			want:    map[string]string{"t1": "b", "t2": "c"},
		},
		{
			name:    "worker using more than its slots counts as full",
			tasks:   []string{"t1"},
			workers: []Worker{{ID: "a", Slots: 1, Used: 3}, {ID: "b", Slots: 1}},
			want:    map[string]string{"t1": "b"},
		},
		{
			name:    "small worker fills up, large one takes the rest",
			tasks:   []string{"t1", "t2", "t3", "t4"},
			workers: []Worker{{ID: "small", Slots: 1}, {ID: "big", Slots: 8}},
			want:    map[string]string{"t1": "big", "t2": "small", "t3": "big", "t4": "big"},
		},
		{
			name:    "exactly enough slots",
			tasks:   []string{"t1", "t2", "t3"},
			workers: []Worker{{ID: "a", Slots: 2, Used: 1}, {ID: "b", Slots: 2}},
			want:    map[string]string{"t1": "b", "t2": "a", "t3": "b"},
		},
		{
			name:    "zero-slot worker ignored",
			tasks:   []string{"t1"},
			workers: []Worker{{ID: "a", Slots: 0}, {ID: "b", Slots: 1}},
			want:    map[string]string{"t1": "b"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.workers)
			got, err := Place(tc.tasks, tc.workers)
			if err != nil {
				t.Fatalf("Place: %v", err)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("Place = %v, want %v", got, tc.want)
			}
			if !slices.Equal(in, tc.workers) {
				t.Errorf("Place modified its input: %v, was %v", tc.workers, in)
			}
		})
	}
}

func TestPlaceInsufficientSlots(t *testing.T) {
	tests := []struct {
		name         string
		tasks        []string
		workers      []Worker
		needed, free int
	}{
		{"no workers", []string{"t1"}, nil, 1, 0},
		{"one short", []string{"t1", "t2", "t3"}, []Worker{{ID: "a", Slots: 1}, {ID: "b", Slots: 1}}, 3, 2},
		{"used slots count", []string{"t1", "t2"}, []Worker{{ID: "a", Slots: 4, Used: 3}}, 2, 1},
		{"all full", []string{"t1"}, []Worker{{ID: "a", Slots: 1, Used: 1}, {ID: "b", Slots: 0}}, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Place(tc.tasks, tc.workers)
			if got != nil {
				t.Errorf("Place placed %v, want nothing", got)
			}
			var ise *InsufficientSlotsError
			if !errors.As(err, &ise) || !errors.Is(err, ErrInsufficientSlots) {
				t.Fatalf("Place error = %v, want an InsufficientSlotsError", err)
			}
			if ise.Needed != tc.needed || ise.Free != tc.free {
				t.Errorf("needed %d free %d, want %d and %d", ise.Needed, ise.Free, tc.needed, tc.free)
			}
			want := fmt.Sprintf("waiting for slots: job needs %d, %d free", tc.needed, tc.free)
			if err.Error() != want {
				t.Errorf("message %q, want %q", err, want)
			}
		})
	}
}

func TestPlaceInvalidInput(t *testing.T) {
	tests := []struct {
		name    string
		tasks   []string
		workers []Worker
	}{
		{"empty task id", []string{""}, []Worker{{ID: "a", Slots: 1}}},
		{"repeated task", []string{"t", "t"}, []Worker{{ID: "a", Slots: 2}}},
		{"empty worker id", []string{"t"}, []Worker{{ID: "", Slots: 1}}},
		{"repeated worker", []string{"t"}, []Worker{{ID: "a", Slots: 1}, {ID: "a", Slots: 1}}},
		{"negative slots", []string{"t"}, []Worker{{ID: "a", Slots: -1}}},
		{"negative used", []string{"t"}, []Worker{{ID: "a", Slots: 1, Used: -1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Place(tc.tasks, tc.workers); !errors.Is(err, ErrInvalidInput) {
				t.Errorf("Place error = %v, want ErrInvalidInput", err)
			}
		})
	}
}

// TestPlaceProperties checks random inputs: every task placed, no worker
// over its slots, the spread as even as the used slots allow, and the result
// independent of the order of the workers.
func TestPlaceProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 500 {
		var workers []Worker
		for i := range rng.IntN(6) {
			slots := rng.IntN(5)
			workers = append(workers, Worker{ID: fmt.Sprintf("w%d", i), Slots: slots, Used: rng.IntN(slots + 1)})
		}
		var tasks []string
		for i := range rng.IntN(12) {
			tasks = append(tasks, fmt.Sprintf("t%d", i))
		}
		got, err := Place(tasks, workers)
		free := 0
		for _, w := range workers {
			free += w.Free()
		}
		if len(tasks) > free {
			if !errors.Is(err, ErrInsufficientSlots) {
				t.Fatalf("iter %d: %d tasks, %d free: error %v", iter, len(tasks), free, err)
			}
			continue
		}
		if err != nil || len(got) != len(tasks) {
			t.Fatalf("iter %d: Place = %v, %v", iter, got, err)
		}
		used := map[string]int{}
		for _, w := range workers {
			used[w.ID] = w.Used
		}
		for _, wid := range got {
			used[wid]++
		}
		for _, w := range workers {
			added := used[w.ID] - w.Used
			if added > 0 && used[w.ID] > w.Slots {
				t.Fatalf("iter %d: worker %s over its %d slots: %d", iter, w.ID, w.Slots, used[w.ID])
			}
			// Spread: a worker that still has a free slot ends with no more
			// than one slot fewer used than any worker that received a task.
			if used[w.ID] < w.Slots {
				for _, o := range workers {
					if used[o.ID] > o.Used && used[o.ID] > used[w.ID]+1 {
						t.Fatalf("iter %d: %s got tasks up to %d used while %s has %d used and free slots", iter, o.ID, used[o.ID], w.ID, used[w.ID])
					}
				}
			}
		}
		shuffled := slices.Clone(workers)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		again, err := Place(tasks, shuffled)
		if err != nil || !maps.Equal(got, again) {
			t.Fatalf("iter %d: result depends on worker order: %v vs %v (%v)", iter, got, again, err)
		}
	}
}
