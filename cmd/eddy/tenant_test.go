package main

import "testing"

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		bad  bool
	}{
		{in: "0", want: 0},
		{in: "1048576", want: 1 << 20},
		{in: "64MiB", want: 64 << 20},
		{in: "1.5GiB", want: 3 << 29},
		{in: "10MB", want: 10e6},
		{in: "4 KiB", want: 4096},
		{in: "12B", want: 12},
		{in: "-1", bad: true},
		{in: "lots", bad: true},
		{in: "MiB", bad: true},
		{in: "99999999999TiB", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSize(tt.in)
			if tt.bad {
				if err == nil {
					t.Fatalf("parseSize(%q) = %d, want an error", tt.in, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}
