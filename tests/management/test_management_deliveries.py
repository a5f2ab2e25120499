"""Which member the page says delivers to a consumer: Ra's local delivery rule."""

from __future__ import annotations

from management.deliveries import delivering_member


def test_a_consumer_on_a_voter_s_node_is_served_by_that_voter() -> None:
    assert delivering_member("b@h:2", ["a@h:1", "b@h:2", "c@h:3"], "a@h:1") == "b@h:2"


def test_a_consumer_where_no_voter_lives_is_served_by_the_leader() -> None:
    assert delivering_member("d@h:4", ["a@h:1", "b@h:2", "c@h:3"], "a@h:1") == "a@h:1"
