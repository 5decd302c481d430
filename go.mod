module github.com/eddy-stream/eddy

go 1.26

require (
	github.com/tetratelabs/wazero v1.12.0
	gopkg.in/yaml.v3 v3.0.1
)

require golang.org/x/sys v0.44.0 // indirect
