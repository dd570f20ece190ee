#!/bin/sh
# Lay out the gantry image's root filesystem in DIR from a static gantry
# binary: the binary, the CA certificates (for S3 and upstream MCP servers
# over TLS), an unprivileged user, and a writable /tmp. Both the Dockerfile
# and the offline build (build.sh) use this, so both make the same image.
# Usage: rootfs.sh DIR GANTRY_BINARY CA_BUNDLE
set -eu
dir=$1 bin=$2 ca=$3
mkdir -p "$dir/usr/local/bin" "$dir/etc/ssl/certs" "$dir/tmp"
cp "$bin" "$dir/usr/local/bin/gantry"
chmod 0755 "$dir/usr/local/bin/gantry"
cp "$ca" "$dir/etc/ssl/certs/ca-certificates.crt"
chmod 0644 "$dir/etc/ssl/certs/ca-certificates.crt"
chmod 1777 "$dir/tmp"
printf 'root:x:0:0:root:/root:/sbin/nologin\ngantry:x:10001:10001:gantry:/tmp:/sbin/nologin\n' >"$dir/etc/passwd"
printf 'root:x:0:\ngantry:x:10001:\n' >"$dir/etc/group"
