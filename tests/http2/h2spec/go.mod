// h2spec (the HTTP/2 conformance suite) at v2.2.1 and the dependencies it is built with, pinned here (and in
// go.sum) so that every machine runs the same 145 cases: scripts/build-h2spec.sh builds it.
module tern/h2spec

go 1.18

require github.com/summerwind/h2spec v2.2.1+incompatible

require (
	github.com/fatih/color v1.15.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mattn/go-colorable v0.1.13 // indirect
	github.com/mattn/go-isatty v0.0.17 // indirect
	github.com/spf13/cobra v1.7.0 // indirect
	github.com/spf13/pflag v1.0.5 // indirect
	golang.org/x/net v0.17.0 // indirect
	golang.org/x/sys v0.13.0 // indirect
	golang.org/x/text v0.13.0 // indirect
)
