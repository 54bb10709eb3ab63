"""Which links of a live run go through the proxy (:mod:`epochlab.kafka.live.proxy`), decided
from the scenario before the run starts.

A new connection is redirected to the proxy only when it is opened, so every link a scenario
will delay must be proxied from the start of the run: :func:`proxy_plan` reads the steps. A
``set_link`` with ``delay_ms`` between two nodes proxies the node connections both ways (the
model's link is one delay for both directions, ``sim/network.py``: ``LinkConfig``); between a
client and brokers it gives the client a proxied listener (all its connections, to every
broker, go through the proxy; only those to the named brokers are delayed). A
``slow_follower`` proxies the connections the follower opens to every other broker (its
fetches; the model delays the fetch requests it sends, ``Network.send`` with
``kind == "fetch"``).
"""

from __future__ import annotations

from typing import Any

from epochlab.scenarios.model import Scenario

__all__ = ["delayed_clients", "node_ids", "proxy_plan", "uses_proxy"]

#: Scenario node names that are not clients.
_NOT_CLIENTS = ("controller", "coordinator")


def uses_proxy(scenario: Scenario) -> bool:
    """Whether a step needs the proxy: a link delay or a slow follower."""
    return any((s.action == "set_link" and s.params.get("delay_ms") is not None) or s.action == "slow_follower"
               for s in scenario.steps)


def delayed_clients(scenario: Scenario) -> list[str]:
    """The clients a ``set_link`` delays, in first-use order: each gets a proxied listener."""
    out: list[str] = []
    for s in scenario.steps:
        if s.action == "set_link" and s.params.get("delay_ms") is not None:
            for end in (s.params["a"], s.params["b"]):
                if isinstance(end, str) and end not in _NOT_CLIENTS and end not in out:
                    out.append(end)
    return out


def node_ids(end: Any, broker_ids: list[int], controller_ids: list[int]) -> list[int]:
    """The cluster nodes a scenario node name stands for (none for a client)."""
    if end == "controller":
        return list(controller_ids)
    if isinstance(end, int):
        return [end] if end in broker_ids else []
    return []


def proxy_plan(scenario: Scenario, broker_ids: list[int],
               controller_ids: list[int]) -> tuple[set[tuple[int, int]], dict[str, int]]:
    """``(node links, clients)`` for :class:`~epochlab.kafka.live.proxy.LinkProxies`: the
    directed node connections to proxy, and each delayed client's listener index."""
    links: set[tuple[int, int]] = set()
    for s in scenario.steps:
        p = s.params
        if s.action == "set_link" and p.get("delay_ms") is not None:
            a = node_ids(p["a"], broker_ids, controller_ids)
            b = node_ids(p["b"], broker_ids, controller_ids)
            links |= {(x, y) for x in a for y in b if x != y} | {(y, x) for x in a for y in b if x != y}
        elif s.action == "slow_follower":
            links |= {(p["broker"], b) for b in broker_ids if b != p["broker"]}
    return links, {name: i for i, name in enumerate(delayed_clients(scenario), 1)}
