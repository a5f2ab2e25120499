"""What a node says when a deprecated feature is used while it is not permitted.

RabbitMQ words the refusal from the feature's deprecation phase in the node's
release (`rabbit_deprecated_features:get_warning/1` with the default messages of
`rabbit_deprecated_features`): a feature the release still permits by default
but the configuration denies gets one text, a feature the release denies by
default (4.3) another. The texts are RabbitMQ's, newlines included. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from releases.table import Phase, Release

__all__ = ["WHEN_PERMITTED", "permitted", "when_denied"]

#: `when_permitted` texts of the features that have their own: what the node logs
#: (as a warning) when a deprecated feature is used while it is permitted
WHEN_PERMITTED: Mapping[str, str] = {
    "queue_master_locator": "queue-master-locator is deprecated. queue-leader-locator "
                            "should be used instead (allowed values are 'client-local' "
                            "and 'balanced')",
}


def permitted(release: Release, feature: str, overrides: Mapping[str, bool]) -> bool:
    """`rabbit_deprecated_features:is_permitted/1`: the node's configuration
    (`deprecated_features.permit.<feature>`, here `overrides`) wins over the
    release's default phase. A release without the mechanism (3.10) permits all."""
    if not release.deprecated_features:
        return True
    if feature in overrides:
        return overrides[feature]
    return release.permits(feature)


def when_denied(feature: str, phase: Phase) -> str:
    """The warning for `feature` used while it is not permitted, in `phase`."""
    if phase == "permitted_by_default":
        return (f"Feature `{feature}` is deprecated.\n"
                "Its use is not permitted per the configuration "
                "(overriding the default, which is permitted):\n"
                f"    \"deprecated_features.permit.{feature} = false\"\n"
                "Its use will not be permitted by default in a future minor "
                "RabbitMQ version and the feature will be removed from a "
                "future major RabbitMQ version; actual versions to be determined.\n"
                "To continue using this feature when it is not permitted "
                "by default, set the following parameter in your configuration:\n"
                f"    \"deprecated_features.permit.{feature} = true\"")
    if phase == "denied_by_default":
        return (f"Feature `{feature}` is deprecated.\n"
                "By default, this feature is not permitted anymore.\n"
                "The feature will be removed from a future major RabbitMQ "
                "version, regardless of the configuration; actual version "
                "to be determined.\n"
                "To continue using this feature when it is not permitted "
                "by default, set the following parameter in your configuration:\n"
                f"    \"deprecated_features.permit.{feature} = true\"")
    return (f"Feature `{feature}` is removed; its use is not possible anymore.\n"
            "If RabbitMQ refuses to start because of this, you need to downgrade "
            "RabbitMQ and make sure the feature is not used at all before upgrading again.")
