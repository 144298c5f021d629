//go:build tools

// Package tools pins quic-go's QUIC interop runner client (the runner's
// "client" image), built by scripts/test into target/tools/quic-interop-client
// for firstbyte/tests/quic_interop.rs.
package tools

import _ "github.com/quic-go/quic-go/interop/client"
