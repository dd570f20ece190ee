#!/usr/bin/env bash
# Check the in-sandbox client libraries (python gantry, node gantry) against a fake bridge.
# Runs inside the sandbox image, this directory mounted anywhere (read-only is fine):
#   docker run --rm -v $PWD/images/sandbox/lib/testdata:/t:ro -e GANTRY_BRIDGE=/tmp/b.sock \
#     gantry-sandbox:latest bash /t/run.sh
# Tests the libraries installed in the image; set GANTRY_TEST_LIB to a mounted copy of
# images/sandbox/lib to test those sources instead. Prints "ok python" and "ok node";
# exits non-zero (failures on stderr) if any check fails.
set -uo pipefail

T="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export GANTRY_BRIDGE="${GANTRY_BRIDGE:-/tmp/gantry-test-bridge.sock}"
if [ -n "${GANTRY_TEST_LIB:-}" ]; then
  export PYTHONPATH="$GANTRY_TEST_LIB/python${PYTHONPATH:+:$PYTHONPATH}"
  export NODE_PATH="$GANTRY_TEST_LIB/node${NODE_PATH:+:$NODE_PATH}"
fi
export PYTHONDONTWRITEBYTECODE=1

python3 "$T/fake_bridge.py" "$GANTRY_BRIDGE" &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null' EXIT
for _ in $(seq 100); do
  [ -S "$GANTRY_BRIDGE" ] && break
  kill -0 "$server" 2>/dev/null || { echo "run.sh: fake bridge exited before listening" >&2; exit 1; }
  sleep 0.05
done
[ -S "$GANTRY_BRIDGE" ] || { echo "run.sh: fake bridge not listening on $GANTRY_BRIDGE after 5s" >&2; exit 1; }

rc=0
python3 "$T/test_client.py" || { echo "run.sh: python client checks failed" >&2; rc=1; }
node "$T/test_client.js" || { echo "run.sh: node client checks failed" >&2; rc=1; }
exit $rc
