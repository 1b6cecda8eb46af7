"""Amazon MSK IAM for the kafka sink: the AWS signer library's token as librdkafka's OAUTHBEARER token.

``--kafka-sasl-mechanism AWS_MSK_IAM`` (extra ``kafka-msk``: ``aws-msk-iam-sasl-signer-python``).
librdkafka asks ``TokenCallback`` for a token when it connects and again before the last one
expires (15 minutes: the signer's lifetime). The token is a SigV4-presigned URL for the action
``kafka-cluster:Connect`` at ``kafka.REGION.amazonaws.com``, base64url-encoded, signed with
credentials from the standard AWS chain (environment, shared files, web identity, instance
roles), found anew for each token so rotated credentials are used.

A token that cannot be made (no credentials, STS unreachable) is logged with the exception's
type only, and librdkafka gets a placeholder that expires in ``RETRY_S``: the broker refuses
it (the sink is not ready, "kafka brokers unreachable"), and a new token is asked for soon.
"""

from __future__ import annotations

import time
from typing import Final

import structlog

from relayd.errors import ConfigError
from relayd.extras import import_extra

#: Seconds a placeholder token lives after a token could not be made (librdkafka asks again).
RETRY_S: Final = 10.0
PLACEHOLDER: Final = "relayd-no-msk-iam-token"

log = structlog.get_logger(__name__)


class TokenCallback:
    """librdkafka's ``oauth_cb`` for MSK IAM: ``(token, expiry as Unix seconds)``."""

    def __init__(self, region: str | None) -> None:
        (self._provider,) = import_extra(
            "kafka",
            "kafka-msk",
            "aws_msk_iam_sasl_signer.MSKAuthTokenProvider",
            needs="aws-msk-iam-sasl-signer-python for AWS_MSK_IAM",
        )
        if region is None:
            import botocore.session

            region = botocore.session.get_session().get_config_variable("region")
        if not region:
            raise ConfigError(
                "sink 'kafka': AWS_MSK_IAM needs a region: a broker host *.kafka.REGION.amazonaws.com,"
                " AWS_REGION, or the shared AWS configuration"
            )
        self.region: str = region
        #: why the last token could not be made (None: it was)
        self.failure: str | None = None

    def __call__(self, _config: str | None = None) -> tuple[str, float]:
        try:
            token, expiry_ms = self._provider.generate_auth_token(self.region)
        except Exception as exc:  # any failure: the broker refuses the placeholder, asked again soon
            self.failure = f"kafka: no AWS MSK IAM token ({type(exc).__name__})"
            log.warning("kafka_msk_iam_token_failed", error=type(exc).__name__)
            return PLACEHOLDER, time.time() + RETRY_S
        self.failure = None
        return str(token), float(expiry_ms) / 1000.0
