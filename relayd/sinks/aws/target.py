"""Parse and check the AWS sink specs: ``sqs:QUEUE_URL``, ``sns:TOPIC_ARN``, ``kinesis:STREAM_NAME``.

Pure: no I/O and no AWS SDK import, so a spec is checked before anything connects (and without
the optional extra installed). Each takes ``?region=`` and ``?endpoint_url=`` (docs/sinks.md)::

    sqs:https://sqs.eu-west-1.amazonaws.com/123456789012/events.fifo
    sns:arn:aws:sns:eu-west-1:123456789012:events
    kinesis:events?region=eu-west-1
    sqs:http://127.0.0.1:5000/123456789012/events?region=us-east-1&endpoint_url=http://127.0.0.1:5000
    sqs:https://sqs.eu-west-1.amazonaws.com/123456789012/events?claim_check_bucket=relayd-bodies

- The region comes from ``?region=``, else from the queue URL's host or the topic ARN, else
  from the standard AWS chain (``AWS_REGION``, ``AWS_DEFAULT_REGION``, the shared config).
- Credentials never come from the spec: only the standard AWS chain (environment, shared
  files, web identity for Kubernetes service accounts, instance roles).
- ``endpoint_url`` (a VPC endpoint, LocalStack, moto) is never shown in a log line or error;
  plaintext ``http://`` to a host that is not loopback needs ``--allow-plaintext``.
- FIFO is read from the name: an SQS queue URL or SNS topic ARN ending in ``.fifo``.
- ``sqs`` and ``sns`` take a claim check: ``claim_check_bucket=`` (an S3 bucket) turns it on,
  ``claim_check_threshold=`` (bytes, default: what the queue or topic accepts) says above what
  size an entry's body goes to S3, ``s3_endpoint_url=`` where S3 is (default: ``endpoint_url``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, Literal
from urllib.parse import urlsplit

from relayd.errors import ConfigError
from relayd.sinks.aws.entries import SQS_MAX_MESSAGE_BYTES
from relayd.sinks.target_rules import check_plaintext, sink_params, url_parts

Service = Literal["sqs", "sns", "kinesis"]
EXAMPLES: Final[dict[str, str]] = {
    "sqs": "sqs:https://sqs.REGION.amazonaws.com/ACCOUNT/QUEUE",
    "sns": "sns:arn:aws:sns:REGION:ACCOUNT:TOPIC",
    "kinesis": "kinesis:STREAM_NAME?region=REGION",
}
_PARAMS: Final = ("region", "endpoint_url")
_CLAIM_CHECK_PARAMS: Final = ("claim_check_bucket", "claim_check_threshold", "s3_endpoint_url")
#: S3 bucket names (the rules for new buckets: lower case, digits, dots and hyphens).
_BUCKET: Final = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_REGION: Final = re.compile(r"[a-z]{2}(-[a-z]+)+-\d+")
_SQS_HOST_REGION: Final = re.compile(r"^sqs\.(?P<region>[a-z0-9-]+)\.amazonaws\.com")
_STREAM_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")


@dataclass(frozen=True, slots=True, repr=False)
class AwsTarget:
    """Where an AWS sink sends (no credentials in it; ``endpoint_url`` kept out of ``repr``)."""

    service: Service
    name: str  # the queue URL, topic ARN or stream name (or stream ARN)
    region: str | None = None
    endpoint_url: str | None = field(default=None)
    fifo: bool = False
    #: the claim check's S3 bucket (None: off), the body size above which it is used (None: only
    #: what does not fit the queue or topic) and S3's endpoint (None: ``endpoint_url``)
    claim_check_bucket: str | None = None
    claim_check_threshold: int | None = None
    s3_endpoint_url: str | None = field(default=None)

    def __repr__(self) -> str:
        endpoint = ", endpoint_url=<set>" if self.endpoint_url else ""
        bucket = f", claim_check_bucket={self.claim_check_bucket!r}" if self.claim_check_bucket else ""
        return f"AwsTarget({self.service}, {self.name!r}, region={self.region!r}{endpoint}{bucket})"


def parse_aws_target(service: Service, text: str, *, allow_plaintext: bool = False) -> AwsTarget:
    """Parse what follows ``sqs:``, ``sns:`` or ``kinesis:``.

    Raises:
        ConfigError: one line naming the problem (never the endpoint URL).
    """
    # a queue URL, topic ARN or stream name has no query of its own: everything after '?' is ours
    known = _PARAMS if service == "kinesis" else _PARAMS + _CLAIM_CHECK_PARAMS
    name, params = sink_params(text, service, known)
    if not name:
        raise ConfigError(f"sink {service!r} needs a target: {EXAMPLES[service]!r}")
    region = params.get("region") or None
    if region is not None and not _REGION.fullmatch(region):
        raise ConfigError(f"sink {service!r}: {region[:40]!r} is not an AWS region name")
    endpoint = params.get("endpoint_url") or None
    if endpoint is not None:
        _check_endpoint(service, endpoint, allow_plaintext=allow_plaintext)
    fifo = False
    if service == "sqs":
        region = region or _sqs_region(name)
        fifo = name.endswith(".fifo")
    elif service == "sns":
        region = region or _sns_region(name)
        fifo = name.endswith(".fifo")
    elif not (name.startswith("arn:aws") or _STREAM_NAME.fullmatch(name)):
        raise ConfigError(f"sink 'kinesis': {name[:60]!r} is not a stream name or ARN")
    return AwsTarget(service, name, region, endpoint, fifo, *_claim_check(service, params, allow_plaintext))


def _claim_check(
    service: str, params: dict[str, str], allow_plaintext: bool
) -> tuple[str | None, int | None, str | None]:
    """The claim check's bucket, threshold and S3 endpoint from ``params`` (checked)."""
    bucket = params.get("claim_check_bucket") or None
    threshold_text = params.get("claim_check_threshold")
    s3_endpoint = params.get("s3_endpoint_url") or None
    if bucket is None:
        if threshold_text is not None or s3_endpoint is not None:
            raise ConfigError(
                f"sink {service!r}: claim_check_threshold and s3_endpoint_url need claim_check_bucket"
            )
        return None, None, None
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise ConfigError(f"sink {service!r}: {bucket[:70]!r} is not an S3 bucket name")
    threshold = None
    if threshold_text is not None:
        if not threshold_text.isdigit() or int(threshold_text) > SQS_MAX_MESSAGE_BYTES:
            most = SQS_MAX_MESSAGE_BYTES
            raise ConfigError(
                f"sink {service!r}: claim_check_threshold must be a byte count from 0 to {most}"
            )
        threshold = int(threshold_text)
    if s3_endpoint is not None:
        _check_endpoint(service, s3_endpoint, allow_plaintext=allow_plaintext)
    return bucket, threshold, s3_endpoint


def _sqs_region(url: str) -> str | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ConfigError("sink 'sqs': malformed queue URL") from None
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.path.count("/") < 2:
        raise ConfigError(f"sink 'sqs' needs a queue URL: {EXAMPLES['sqs']!r}")
    match = _SQS_HOST_REGION.match(parts.hostname)
    return match["region"] if match else None


def _sns_region(arn: str) -> str | None:
    parts = arn.split(":")
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sns":
        raise ConfigError(f"sink 'sns' needs a topic ARN: {EXAMPLES['sns']!r}")
    return parts[3] or None


def _check_endpoint(service: str, endpoint: str, *, allow_plaintext: bool) -> None:
    parts = url_parts(endpoint, f"sink {service!r}: endpoint_url is malformed")
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ConfigError(f"sink {service!r}: endpoint_url must be an http:// or https:// URL")
    if parts.username or parts.password:
        raise ConfigError(f"sink {service!r}: no credentials in endpoint_url (the AWS chain provides them)")
    # No credentials cross it: AWS requests are signed, the secret key never sent.
    tls = parts.scheme == "https"
    check_plaintext(
        [parts.hostname or ""], service, tls=tls, credentials=False, allow_plaintext=allow_plaintext
    )
