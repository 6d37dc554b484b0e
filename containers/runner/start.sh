#!/bin/sh
# A managed runner's life (durable-objects/managed-runner.ts starts it with the environment):
# register with the registration token, as any runner does, then listen until stopped. listen is
# the container's main process, so the container's SIGTERM reaches it.
set -eu
CLI=/opt/docket-runner/bin/docket-runner.mjs
# The Containers library counts a container as started once its port answers (READY_PORT
# in the Durable Object); the runner only calls out, so this answers for it. Nothing else calls it.
node -e 'require("node:http").createServer((_, res) => res.end("up\n")).listen(Number(process.argv[1]))' 8080 &
node "$CLI" register
unset DOCKET_REGISTRATION_TOKEN
exec node "$CLI" listen --json
