module github.com/eddy-stream/eddy

go 1.26
