"""The pure pieces of the quorum-queue glue: placement, machine config, stored messages."""

from __future__ import annotations

import pytest

from channel.protocol.framing import Content
from channel.queue_types.backend import Message
from channel.queue_types.qq_message import QqMessage
from channel.queue_types.quorum.qq_cluster import fifo_config, group_size, place_members, ra_name
from releases import RELEASES

NODES = ["n1", "n2", "n3", "n4"]


def test_ra_names_follow_rabbitmq_internal_names() -> None:
    assert ra_name("/", "q1") == "%2F_q1"
    assert ra_name("prod", "orders") == "prod_orders"


@pytest.mark.parametrize(("args", "expected"), [
    ({}, 3),
    ({"x-quorum-initial-group-size": 1}, 1),
    ({"x-quorum-initial-group-size": 7}, 4),  # capped by the cluster
])
def test_group_size_defaults_to_quorum_cluster_size_capped_by_nodes(
        args: dict[str, int], expected: int) -> None:
    assert group_size(args, 3, len(NODES)) == expected


def test_client_local_leads_on_the_declaring_node_followers_after_it() -> None:
    assert place_members(NODES, "n3", 3, "client-local", {}, {}) == ["n3", "n4", "n1"]


def test_followers_go_to_the_nodes_with_fewest_replicas() -> None:
    replicas = {"n2": 5, "n3": 1, "n4": 1}
    assert place_members(NODES, "n1", 3, "client-local", {}, replicas) == ["n1", "n3", "n4"]


@pytest.mark.parametrize("locator", ["balanced", "least-leaders", "min-masters", "random"])
def test_balanced_leads_on_the_node_with_fewest_leaders(locator: str) -> None:
    leaders = {"n1": 2, "n2": 1, "n3": 0, "n4": 0}
    assert place_members(NODES, "n1", 2, locator, leaders, {})[0] == "n3"


def test_declaring_from_outside_the_cluster_starts_from_the_first_node() -> None:
    assert place_members(NODES, "elsewhere", 2, "client-local", {}, {}) == ["n1", "n2"]


def test_machine_config_from_arguments() -> None:
    conf = fifo_config("/", "q", {"x-max-length": 5, "x-overflow": "reject-publish",
                                  "x-message-ttl": 100, "x-single-active-consumer": True}, 42,
                       RELEASES["4.2"])
    assert conf["name"] == "%2F_q"
    assert conf["queue_resource"] == ("resource", "/", "queue", "q")
    assert (conf["max_length"], conf["overflow_strategy"], conf["msg_ttl"]) == (
        5, "reject_publish", 100)
    assert conf["single_active_consumer_on"] is True
    assert conf["delivery_limit"] == 20  # the release's default lives outside the machine
    assert conf["created"] == 42


def test_reject_publish_dlx_is_treated_as_drop_head_and_delivery_limit_is_kept() -> None:
    conf = fifo_config("/", "q", {"x-overflow": "reject-publish-dlx", "x-delivery-limit": -1},
                       0, RELEASES["4.2"])
    assert conf["overflow_strategy"] == "drop_head"
    assert conf["delivery_limit"] == -1


def _message(**props: object) -> Message:
    return Message("x", "rk", Content.build(b"body", **props), ("rk",))


def test_stored_message_exposes_size_ttl_and_priority_to_the_machine() -> None:
    m = QqMessage.from_message(_message(expiration="1500", priority=7))
    assert m.mc_size() == (len(m.properties_bin), 4)
    assert (m.mc_ttl(), m.mc_priority()) == (1500, 7)
    plain = QqMessage.from_message(_message())
    assert (plain.mc_ttl(), plain.mc_priority()) == (None, None)


def test_a_message_without_annotations_is_delivered_byte_for_byte() -> None:
    original = _message(headers={"a": 1}, content_type="text/plain")
    assert QqMessage.from_message(original).to_message() == original


def test_delivery_count_annotation_becomes_a_header_next_to_the_published_ones() -> None:
    m = QqMessage.from_message(_message(headers={"a": 1}, content_type="text/plain"))
    m = m.mc_set_annotation("x-delivery-count", 1).mc_set_annotation("x-delivery-count", 2)
    assert m.mc_get_annotation("x-delivery-count") == 2
    props = m.to_message().content.properties()
    assert props.headers == {"a": 1, "x-delivery-count": 2}
    assert props.content_type == "text/plain"


def test_annotations_without_the_x_prefix_stay_inside_the_queue() -> None:
    m = QqMessage.from_message(_message()).mc_set_annotation("internal", True)
    assert m.to_message().content.properties().headers is None
