package placement_test

import (
	"fmt"

	"github.com/eddy-stream/eddy/scheduler/placement"
)

func ExamplePlace() {
	workers := []placement.Worker{
		{ID: "w1", Slots: 4, Used: 1},
		{ID: "w2", Slots: 2},
	}
	deployment, err := placement.Place([]string{"a", "b", "c"}, workers)
	fmt.Println(deployment, err)

	_, err = placement.Place([]string{"a", "b", "c", "d", "e", "f"}, workers)
	fmt.Println(err)
	// Output:
	// map[a:w2 b:w1 c:w2] <nil>
	// waiting for slots: job needs 6, 5 free
}
