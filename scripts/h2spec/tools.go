//go:build tools

// Package tools pins h2spec, the HTTP/2 conformance suite scripts/test builds for
// firstbyte/tests/h2spec.rs, with dependencies that Debian's Go (1.19) still builds.
package tools

import _ "github.com/summerwind/h2spec/cmd/h2spec"
