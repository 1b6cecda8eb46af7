#!/usr/bin/env bash
# Install the Debian packages the test suite uses for real servers and tools, and only those
# missing. Run it once (as root) on a fresh Debian machine before the README's test command;
# .ci/run calls it. Add a new system package here, with the check that finds it installed.
set -euo pipefail

# System packages the tests use for real: redis-server (+ redis-cli for the cluster tests) and
# promtool (from Debian's prometheus package) to check the alerting rules.
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
# The image test (tests/deploy/test_image.py): a private dockerd with Debian's client at
# /usr/bin/docker, and debootstrap for its stand-in base image.
{ command -v dockerd >/dev/null 2>&1 && [ -x /usr/bin/docker ]; } || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
# Headless Chromium and its driver for the console's browser tests (tests/relayd/console).
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
# RabbitMQ for the amqp sink's tests (run directly, not as a service: tests/support/rabbitmq.py)
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || missing+=(rabbitmq-server)
# libfaketime: the relay host's clock moved (tests/faults/test_host_clock.py)
{ command -v faketime >/dev/null 2>&1 && [ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ]; } || missing+=(faketime)
if ((${#missing[@]})); then
  apt-get update
  # Packages that ship a service (rabbitmq-server) must not start it here: fixtures start their
  # own servers on free loopback ports. policy-rc.d exit 101 forbids starts during the install.
  policy_added=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    policy_added=1
  fi
  apt-get install -y --no-install-recommends "${missing[@]}"
  [ -z "$policy_added" ] || rm -f /usr/sbin/policy-rc.d
fi
# The Pub/Sub emulator for the pubsub sink's tests (tests/support/pubsub.py): the package
# google-cloud-cli-pubsub-emulator (Java), which the machine image ships. It comes from Google's
# apt repository, not Debian's, so it is checked here and not installed.
emulator=/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator
if [ ! -x "$emulator" ] && ! command -v gcloud >/dev/null 2>&1; then
  echo "missing: google-cloud-cli-pubsub-emulator (the pubsub sink's tests need it; not in Debian)" >&2
fi
