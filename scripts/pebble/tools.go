//go:build tools

// Package tools pins Pebble, Let's Encrypt's ACME test server, and its DNS stub for the certbot
// round trip (scripts/certbot-check), with dependencies that Debian's Go (1.19) still builds
// and current Go still links (Pebble's own pins of golang.org/x/{net,sys} no longer link).
package tools

import (
	_ "github.com/letsencrypt/pebble/v2/cmd/pebble"
	_ "github.com/letsencrypt/pebble/v2/cmd/pebble-challtestsrv"
)
