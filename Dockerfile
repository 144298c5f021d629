# firstbyte's container image: a Rust build stage on Debian bookworm, and a bookworm-slim
# runtime that runs firstbyte in the foreground as the unprivileged user `firstbyte`, serving
# the built-in page on port 8443 (a self-signed certificate made at the container's first
# start), the access log on stdout and the error log on stderr.
#
#   docker build -t firstbyte .          (or: podman build -t firstbyte .)
#   docker run --rm -p 8443:8443 firstbyte
#   curl -k https://localhost:8443/
#
# Your sites: -v ./sites:/etc/firstbyte/sites-enabled:ro (ports above 1024: the server is not
# root), or a whole configuration: -v ./firstbyte.conf:/etc/firstbyte/firstbyte.conf:ro.
# `docker kill -s HUP` reloads; `docker stop` sends SIGQUIT, which drains.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p firstbyte \
 && strip --strip-unneeded target/release/firstbyte

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends openssl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --user-group --uid 10001 --home-dir /var/lib/firstbyte \
        --shell /usr/sbin/nologin firstbyte \
 && mkdir -p /etc/firstbyte/sites-enabled /var/lib/firstbyte \
 && chown firstbyte:firstbyte /var/lib/firstbyte
COPY --from=build /src/target/release/firstbyte /usr/sbin/firstbyte
COPY packaging/mime.types /etc/firstbyte/mime.types
COPY packaging/container/firstbyte.conf /etc/firstbyte/firstbyte.conf
COPY packaging/container/entrypoint /usr/local/bin/firstbyte-entrypoint
USER firstbyte
EXPOSE 8443
STOPSIGNAL SIGQUIT
ENTRYPOINT ["/usr/local/bin/firstbyte-entrypoint"]
CMD ["firstbyte"]
