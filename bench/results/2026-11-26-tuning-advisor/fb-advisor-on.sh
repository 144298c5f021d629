#!/bin/sh
# firstbyte with `tuning_advisor on;` added to the http block of the config the loopback bench
# wrote (it starts servers as `BINARY -c CONF`). FB_REAL: the real binary.
if [ "$1" = "-c" ]; then
    sed -i 's/^http {$/http {\n    tuning_advisor on;/' "$2"
fi
exec "${FB_REAL:-target/release/firstbyte}" "$@"
