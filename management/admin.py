"""The API's writes of users, permissions and policies, through `broker.ctl_ops`
(what `warren ctl add_user`, `set_permissions` and `set_policy` run).

Each returns the status RabbitMQ answers: 201 for what it created, 204 for what
it changed or deleted; refusals are RabbitMQ's 400 reasons, a missing object 404.
"""

from __future__ import annotations

from typing import Any

from broker import ctl_ops
from broker.node import BrokerNode
from channel.access.passwords import DEFAULT_HASHING_ALGORITHM, hash_password
from management.calls import in_node
from management.errors import bad_request, not_found

__all__ = ["clear_permissions", "clear_policy", "delete_user", "put_permissions",
           "put_policy", "put_user"]

PERMISSION_KEYS = ("configure", "write", "read")


def _tags(value: Any) -> list[str]:
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    return [str(t) for t in value]


def put_user(broker: BrokerNode, name: str, body: dict[str, Any]) -> int:
    """A user with a password (hashed here), a given hash, or none (no password
    matches); its tags replace the ones it had."""
    if "tags" not in body:
        raise bad_request("tags_not_present")
    if "password" in body:
        if not isinstance(body["password"], str):
            raise bad_request("password must be a string")
        password_hash, algorithm = hash_password(body["password"]), DEFAULT_HASHING_ALGORITHM
    else:
        password_hash = str(body.get("password_hash", ""))
        algorithm = str(body.get("hashing_algorithm", DEFAULT_HASHING_ALGORITHM))
    existed = name in broker.view.state.users
    if existed:
        in_node(broker.node, ctl_ops.change_password_hash, name, password_hash, algorithm)
    else:
        in_node(broker.node, ctl_ops.add_user, name, password_hash, algorithm)
    in_node(broker.node, ctl_ops.set_user_tags, name, _tags(body["tags"]))
    return 204 if existed else 201


def delete_user(broker: BrokerNode, name: str) -> int:
    if name not in broker.view.state.users:
        raise not_found()
    in_node(broker.node, ctl_ops.delete_user, name)
    return 204


def put_permissions(broker: BrokerNode, vhost: str, user: str, body: dict[str, Any]) -> int:
    missing = [k for k in PERMISSION_KEYS if k not in body]
    if missing:
        raise bad_request("[" + ",".join(f"{{key_missing,{k}}}" for k in missing) + "]")
    state = broker.view.state
    if vhost not in state.vhosts or user not in state.users:
        raise bad_request("vhost_or_user_not_found")
    existed = vhost in state.users[user].permissions
    in_node(broker.node, ctl_ops.set_permissions, vhost, user,
            *(str(body[k]) for k in PERMISSION_KEYS))
    return 204 if existed else 201


def clear_permissions(broker: BrokerNode, vhost: str, user: str) -> int:
    found = broker.view.state.users.get(user)
    if found is None or vhost not in found.permissions:
        raise not_found()
    in_node(broker.node, ctl_ops.clear_permissions, vhost, user)
    return 204


def _escaped(text: str) -> str:
    """RabbitMQ escapes the markup characters of a validation message."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def put_policy(broker: BrokerNode, vhost: str, name: str, body: dict[str, Any]) -> int:
    for key in ("pattern", "definition"):
        if key not in body:
            raise bad_request(f"[{{key_missing,{key}}}]")
    existed = (vhost, name) in broker.view.state.policies
    try:
        in_node(broker.node, ctl_ops.set_policy, vhost, name, str(body["pattern"]),
                dict(body["definition"]), int(body.get("priority", 0)),
                str(body.get("apply-to", "all")))
    except ctl_ops.CtlError as exc:
        raise bad_request(_escaped(str(exc)) + "\n") from None
    return 204 if existed else 201


def clear_policy(broker: BrokerNode, vhost: str, name: str) -> int:
    if (vhost, name) not in broker.view.state.policies:
        raise not_found()
    in_node(broker.node, ctl_ops.clear_policy, vhost, name)
    return 204
